"""Defaults are the C core's (courier_setting_default), read, never restated."""
from __future__ import annotations

import inspect

import courier
from courier._enums import Setting
from courier._lib import setting_default


def test_retry_defaults_are_the_cores() -> None:
    r = courier.Retry()
    assert r.max_retries == setting_default(Setting.RETRY_MAX_RETRIES)
    assert r.base_delay == setting_default(Setting.RETRY_BASE_DELAY_MS) / 1000
    assert r.max_delay == setting_default(Setting.RETRY_MAX_DELAY_MS) / 1000


def test_log_file_defaults_are_the_cores() -> None:
    params = inspect.signature(courier.Engine.add_log_file).parameters
    assert params["max_bytes"].default == setting_default(Setting.LOG_FILE_MAX_BYTES)
    assert params["max_files"].default == setting_default(Setting.LOG_FILE_MAX_FILES)


def test_every_setting_has_a_default() -> None:
    for s in Setting:
        assert setting_default(s) > 0, s
