"""Each Python program has its own default store (issue 28, bug 1): the C core names the default
store after the program, and for Python the program is the interpreter, so every script opened
$XDG_DATA_HOME/python3/courier and saw the others' cookies and frozen requests. The binding names
it after the main script (courier.default_app_id); without a script (-c, stdin, the REPL) the
engine keeps a temporary store. The programs run as real subprocesses, under an XDG_DATA_HOME of
the test's own."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import courier

# Freezes a POST (paused replay: it stays in the journal) and takes a session cookie, then prints
# what the engine sees: its store, its frozen requests and its cookies.
_WRITER = """
import json, sys, courier
with courier.Engine(base_url=sys.argv[1], frozen_paused=True, timeout=10) as e:
    e.get("/cookies/set?session=s3cret")
    e.set_offline()
    try:
        e.post("/echo", json={"pay": 100}, freeze="auto")
    except courier.Frozen:
        pass
    print(json.dumps({"store": e.store_dir, "app_id": getattr(courier, "default_app_id", lambda: "?")(),
                      "frozen": [f.url for f in e.frozen.list()], "cookies": [c.name for c in e.list_cookies()]}))
"""

# Only looks: what another program finds in its own default store.
_READER = """
import json, os, sys, courier
with courier.Engine(base_url=sys.argv[1], frozen_paused=True, timeout=10) as e:
    print(json.dumps({"store": e.store_dir, "app_id": getattr(courier, "default_app_id", lambda: "?")(),
                      "frozen": [f.url for f in e.frozen.list()], "cookies": [c.name for c in e.list_cookies()],
                      "cookie_sent": e.get("/cookies").json()["cookie"]}))
"""


def _env(data: pathlib.Path) -> dict[str, str]:
    env = dict(os.environ)
    env["XDG_DATA_HOME"] = str(data)
    env.pop("PYTHONSAFEPATH", None)  # a script's own directory on sys.path is no matter here
    return env


def _run(args: list[str], data: pathlib.Path, cwd: pathlib.Path) -> dict:
    out = subprocess.run([sys.executable, *args], capture_output=True, text=True, env=_env(data), cwd=cwd,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_two_scripts_share_nothing(base_url: str, tmp_path: pathlib.Path) -> None:
    data = tmp_path / "data"
    (tmp_path / "shop.py").write_text(_WRITER)
    (tmp_path / "news.py").write_text(_READER)
    shop = _run(["shop.py", base_url], data, tmp_path)
    assert len(shop["frozen"]) == 1 and shop["cookies"] == ["session"]

    news = _run(["news.py", base_url], data, tmp_path)
    assert news["frozen"] == [] and news["cookies"] == []  # not the shop's payment nor its session
    assert news["cookie_sent"] == ""  # nor sent its session to the server
    assert news["store"] == str(data / "news" / "courier") and news["app_id"] == "news"

    (tmp_path / "later").mkdir()  # the shop's own store outlives it: a later shop.py finds it
    (tmp_path / "later" / "shop.py").write_text(_READER)
    again = _run(["later/shop.py", base_url], data, tmp_path)
    assert again["store"] == shop["store"] == str(data / "shop" / "courier") and shop["app_id"] == "shop"
    assert again["frozen"] == shop["frozen"] and again["cookies"] == ["session"]
    assert "session=s3cret" in again["cookie_sent"]


def test_python_m_names_the_store_after_the_module(base_url: str, tmp_path: pathlib.Path) -> None:
    data = tmp_path / "data"
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "__init__.py").write_text("")
    (tmp_path / "tools" / "sync.py").write_text(_READER)
    (tmp_path / "tools" / "__main__.py").write_text(_READER)
    sync = _run(["-m", "tools.sync", base_url], data, tmp_path)
    assert sync["store"] == str(data / "tools.sync" / "courier") and sync["app_id"] == "tools.sync"
    pkg = _run(["-m", "tools", base_url], data, tmp_path)
    assert pkg["store"] == str(data / "tools" / "courier") and pkg["app_id"] == "tools"


def test_without_a_script_the_store_is_temporary(base_url: str, tmp_path: pathlib.Path) -> None:
    data = tmp_path / "data"
    (tmp_path / "shop.py").write_text(_WRITER)
    _run(["shop.py", base_url], data, tmp_path)
    for args, stdin in ((["-c", _READER, base_url], None), (["-", base_url], _READER)):
        out = subprocess.run([sys.executable, *args], input=stdin, capture_output=True, text=True,
                             env=_env(data), cwd=tmp_path, timeout=60)
        assert out.returncode == 0, out.stderr
        seen = json.loads(out.stdout.strip().splitlines()[-1])
        assert seen["frozen"] == [] and seen["cookies"] == []
        assert not seen["store"].startswith(str(data))  # a temporary directory, removed at close
        assert not os.path.exists(seen["store"])
        assert seen["app_id"] is None
    assert sorted(os.listdir(data)) == ["shop"]  # nothing else was made in the durable place


def test_an_explicit_app_id_or_store_wins(tmp_path: pathlib.Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    with courier.Engine(app_id="org.example.notes") as e:
        assert e.store_dir == str(tmp_path / "data" / "org.example.notes" / "courier")
    with courier.Engine(store=str(tmp_path / "s")) as e:
        assert e.store_dir == str(tmp_path / "s")
