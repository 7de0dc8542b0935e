"""Security policies per engine and per request against a real nginx with a CA made for the run
(scripts/tls-fixture). Skipped, saying why, when nginx is not installed (scripts/setup installs it)."""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
from typing import Iterator

import pytest

import courier
from conftest import free_port, wait_until

ROOT = pathlib.Path(__file__).resolve().parents[3]
NGINX = next((p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx", shutil.which("nginx") or "")
              if p and os.access(p, os.X_OK)), None)


class TLSWorld:
    def __init__(self, root: pathlib.Path, port: int) -> None:
        self.dir = root
        self.port = port

    def f(self, name: str) -> str:
        return str(self.dir / name)

    def url(self, host: str, path: str = "/") -> str:
        return f"https://{host}:{self.port}{path}"

    @property
    def pin(self) -> str:
        return (self.dir / "server.pin").read_text().strip()


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TLSWorld]:
    if NGINX is None:
        pytest.skip("nginx is not installed (scripts/setup installs it); the TLS policy tests need it")
    d = tmp_path_factory.mktemp("tls")
    port = free_port()
    subprocess.run(["bash", str(ROOT / "scripts" / "tls-fixture"), str(d), str(port)], check=True)
    proc = subprocess.Popen([NGINX, "-p", str(d), "-e", str(d / "error.log"), "-c", str(d / "nginx.conf")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        import socket

        def up() -> bool:
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0
        assert wait_until(up), (d / "error.log").read_text() if (d / "error.log").exists() else "nginx did not start"
        yield TLSWorld(d, port)
    finally:
        proc.terminate()
        proc.wait()


def test_two_switches_pinning_and_request_policies(tls: TLSWorld) -> None:
    ca = courier.Security(ca_file=tls.f("ca.pem"))
    with courier.Engine(temporary_store=True, security=ca) as e:
        assert e.get(tls.url("localhost")).text == "ok"
        with pytest.raises(courier.TLSError):  # the certificate names localhost only
            e.get(tls.url("127.0.0.1"))
        assert e.get(tls.url("127.0.0.1"), security=courier.Security(ca_file=tls.f("ca.pem"),
                                                                      validates_domain_name=False)).status == 200
        assert e.get(tls.url("localhost"), security=courier.Security(allow_invalid_certificates=True)).status == 200
        with pytest.raises(courier.TLSError):  # allow_invalid leaves the name check on
            e.get(tls.url("127.0.0.1"), security=courier.Security(allow_invalid_certificates=True))
        pinned = courier.Security(ca_file=tls.f("ca.pem"), pinning="public_key", pins=tls.pin)
        assert e.get(tls.url("localhost"), security=pinned).status == 200
        with pytest.raises(courier.PinningError):
            e.get(tls.url("localhost"), security=courier.Security(pinning=courier.PinningMode.CERTIFICATE,
                                                                   pins=tls.f("other.pem")))
        assert e.get(tls.url("localhost"), security=courier.Security(pinning="certificate",
                                                                      pins=tls.f("server.pem"))).status == 200
        with pytest.raises(courier.NotFound):
            e.get(tls.url("localhost"), security=courier.Security(ca_file=tls.f("missing.pem")))
    with courier.Engine(temporary_store=True) as e:
        with pytest.raises(courier.TLSError):  # the system's CAs do not know this one
            e.get(tls.url("localhost"))


def test_client_certificates(tls: TLSWorld) -> None:
    with courier.Engine(temporary_store=True, security=courier.Security(ca_file=tls.f("ca.pem"))) as e:
        with pytest.raises(courier.ClientCertificateError):
            e.get(tls.url("localhost", "/mtls"), security=courier.Security(
                ca_file=tls.f("ca.pem"), client_certificate=tls.f("client.pem"), client_key=tls.f("client.key"),
                client_key_password="wrong"))
    mtls = courier.Security(ca_file=tls.f("ca.pem"), client_certificate=tls.f("client.pem"),
                            client_key=tls.f("client.key"), client_key_password="secret")
    with courier.Engine(temporary_store=True, security=mtls) as e:
        assert e.get(tls.url("localhost", "/mtls")).text == "client CN=courier-client"
        with pytest.raises(courier.HTTPStatusError) as info:  # a request's policy without a certificate
            e.get(tls.url("localhost", "/mtls"), security=courier.Security(ca_file=tls.f("ca.pem")))
        assert info.value.response.status == 403
        p12 = courier.Security(ca_file=tls.f("ca.pem"), client_certificate=tls.f("client.p12"),
                               client_key_password="secret")
        assert e.get(tls.url("localhost", "/mtls"), security=p12).text == "client CN=courier-client"


def test_certificate_status(tls: TLSWorld) -> None:
    """Certificate status required: "ocsp.localhost" staples a good OCSP response and answers,
    "nostaple.localhost" staples none and raises TLSError (curl code 91) with no response; a request's
    policy without the requirement is answered."""
    required = courier.Security(ca_file=tls.f("ca.pem"), requires_certificate_status=True)
    resolve = {f"ocsp.localhost:{tls.port}": "127.0.0.1", f"nostaple.localhost:{tls.port}": "127.0.0.1"}
    with courier.Engine(temporary_store=True, security=required, resolve=resolve) as e:
        assert e.get(tls.url("ocsp.localhost")).text == "stapled"
        with pytest.raises(courier.TLSError) as info:
            e.get(tls.url("nostaple.localhost"))
        assert info.value.curl_code == 91
        assert info.value.response is None
        assert e.get(tls.url("nostaple.localhost"),
                     security=courier.Security(ca_file=tls.f("ca.pem"))).text == "no staple"
