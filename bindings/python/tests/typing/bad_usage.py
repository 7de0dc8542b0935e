"""Mistakes mypy must catch (test_typing.py checks the line and code of each error)."""
from __future__ import annotations

import courier

engine = courier.Engine()
engine.get("/json", timeout="soon")  # line 7: arg-type
engine.get("/json", tiemout=5)  # line 8: call-arg (misspelt option)
engine.post("/x", freeze=3.5)  # line 9: arg-type
engine.get("/json", retry=3)  # line 10: arg-type
