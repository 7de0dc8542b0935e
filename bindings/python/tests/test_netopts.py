"""Names, addresses and sockets from Python: resolve and connect_to per engine and per request (the
URL's host kept for the Host field, a request's overrides its own), the remote address in the
metrics, DoH, the IP version, Unix sockets (a relay the test makes in front of the loopback server)
and values the core refuses."""
from __future__ import annotations

import os
import sys
import socket
import threading
from typing import Iterator
from urllib.parse import urlsplit

import pytest

import courier


def _port(base_url: str) -> int:
    return urlsplit(base_url).port or 80


def _host(response: courier.Response) -> str:
    return dict((k.lower(), v) for k, v in response.json()["headers"])["host"]


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_engine_resolve_and_the_metrics(base_url: str) -> None:
    port = _port(base_url)
    with courier.Engine(temporary_store=True, resolve={f"api.test:{port}": ["127.0.0.1"]},
                        dns_cache_lifetime=30, ip_version="v4", happy_eyeballs_delay=0.1) as e:
        r = e.get(f"http://api.test:{port}/echo")
        assert _host(r) == f"api.test:{port}"
        assert (r.metrics.remote_ip, r.metrics.remote_port, r.metrics.connection_reused) == ("127.0.0.1", port, False)
        assert e.get(f"http://api.test:{port}/echo").metrics.connection_reused


def test_request_overrides_replace_the_engines_and_stay_their_own(base_url: str) -> None:
    port = _port(base_url)
    with courier.Engine(temporary_store=True, connect_to=[("api.test", 80, "127.0.0.1", _dead_port())]) as e:
        with pytest.raises(courier.CannotConnect):
            e.get("http://api.test/echo")
        r = e.get("http://api.test/echo", connect_to={"api.test:80": f"127.0.0.1:{port}"})
        assert _host(r) == "api.test"
        r = e.get(f"http://api.test:{port}/echo", resolve=[("api.test", port, "127.0.0.1")])
        assert _host(r) == f"api.test:{port}"
        with pytest.raises(courier.CannotConnect):
            e.get("http://api.test/echo")
    with courier.Engine(temporary_store=True) as plain:
        assert plain.get(f"http://api.test:{port}/echo", resolve={f"api.test:{port}": "127.0.0.1"}).status == 200
        with pytest.raises(courier.CannotResolve):
            plain.get(f"http://api.test:{port}/echo")


class _Relay:
    """A Unix socket at `path` ("@name": abstract) joined to the loopback server per connection."""

    def __init__(self, path: str, port: int) -> None:
        self.port, self.connections = port, 0
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind("\0" + path[1:] if path.startswith("@") else path)
        self.sock.listen(8)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            s = socket.create_connection(("127.0.0.1", self.port))
            for a, b in ((c, s), (s, c)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for x in (a, b):
                try:
                    x.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


@pytest.fixture
def relay(base_url: str, tmp_path) -> Iterator[tuple[_Relay, str]]:
    path = str(tmp_path / "api.sock")
    r = _Relay(path, _port(base_url))
    yield r, path
    r.close()


def test_engine_over_a_unix_socket(relay: tuple[_Relay, str], base_url: str) -> None:
    rl, path = relay
    with courier.Engine(temporary_store=True, unix_socket=path) as e:
        r = e.get("http://docker.test/echo")
        assert _host(r) == "docker.test" and r.metrics.remote_ip == ""
        assert e.get("http://docker.test/echo").status == 200
        assert rl.connections == 1  # the socket's connection reused
        assert e.get(base_url + "/echo", unix_socket="").metrics.remote_ip == "127.0.0.1"  # TCP for one
        assert rl.connections == 1


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="abstract sockets are Linux's")
def test_request_over_an_abstract_socket(base_url: str) -> None:
    name = f"@courier-py-{os.getpid()}"
    rl = _Relay(name, _port(base_url))
    try:
        with courier.Engine(base_url=base_url, temporary_store=True) as e:
            assert e.get("/echo", unix_socket=name).status == 200
            assert rl.connections == 1
            assert e.get("/echo").status == 200
            assert rl.connections == 1
    finally:
        rl.close()


def test_doh_and_refused_values(base_url: str) -> None:
    with courier.Engine(base_url=base_url, temporary_store=True,
                        doh_url=f"https://127.0.0.1:{_dead_port()}/dns-query") as e:
        assert e.get("/echo").status == 200  # an address needs no resolving
        name = socket.gethostname()
        try:
            socket.getaddrinfo(name, None)
        except OSError:
            name = ""
        if name:  # the system resolves it; the DoH server that is not there cannot
            with pytest.raises(courier.CannotResolve):
                e.get(f"http://{name}:{_port(base_url)}/echo")
    with pytest.raises(courier.InvalidURL):
        courier.Engine(temporary_store=True, doh_url="http://127.0.0.1/dns-query")
    with pytest.raises(courier.InvalidArgument):
        courier.Engine(temporary_store=True, resolve={"a.test:80": "nope"})
    with pytest.raises(courier.InvalidArgument):
        courier.Engine(temporary_store=True, resolve={"a.test": "127.0.0.1"})
    with pytest.raises(courier.InvalidArgument):
        courier.Engine(temporary_store=True, ip_version=5)
    with pytest.raises(courier.InvalidArgument):
        courier.Engine(temporary_store=True, dns_cache_lifetime=-2)
    with courier.Engine(base_url=base_url, temporary_store=True) as e:
        with pytest.raises(courier.InvalidArgument):
            e.get("/echo", connect_to=[("a.test", 0, "b.test", 1)])


def test_http_versions(base_url: str) -> None:
    with courier.Engine(base_url=base_url, temporary_store=True, http_version="v2_only") as e:
        with pytest.raises(courier.HTTPVersionError) as info:
            e.get("/echo")  # the loopback server speaks HTTP/1.1 only
        assert info.value.code == courier.HTTPVersionError.CODE == -63
        assert e.get("/echo", http_version=courier.HTTPVersion.DEFAULT).metrics.http_version == 11
    with courier.Engine(base_url=base_url, temporary_store=True) as e:
        assert e.get("/echo", http_version="v1_1").metrics.http_version == 11
        with pytest.raises(courier.HTTPVersionError):
            e.get("/echo", http_version=courier.HTTPVersion.V2_ONLY)
    if courier.http3_available():
        courier.Engine(temporary_store=True, http_version="v3").close()
    else:
        with pytest.raises(courier.HTTPVersionError):
            courier.Engine(temporary_store=True, http_version=courier.HTTPVersion.V3_ONLY)
    with pytest.raises(courier.InvalidArgument):
        courier.Engine(temporary_store=True, http_version=9)


def test_decode_content(base_url: str) -> None:
    url = "/origin/py-coded?Content-Encoding=gzip&_gzip=1"
    with courier.Engine(base_url=base_url, temporary_store=True, decode_content=False) as e:
        r = e.get(url)
        assert r.body[:2] == b"\x1f\x8b" and r.headers["Content-Encoding"] == "gzip"
        r = e.get(url, decode_content=True)
        assert r.body == b"decoded body" and "Content-Encoding" not in r.headers
    with courier.Engine(base_url=base_url, temporary_store=True) as e:
        assert e.get(url).body == b"decoded body"
        assert e.get(url, decode_content=False).body[:2] == b"\x1f\x8b"


def test_pool_limits(base_url: str) -> None:
    with courier.Engine(base_url=base_url, temporary_store=True, max_idle_connections=1,
                        idle_connection_timeout=30) as e:
        assert e.get("/echo").status == 200
    with pytest.raises(courier.InvalidArgument):
        courier.Engine(temporary_store=True, max_idle_connections=0)


def test_pool_figures(base_url: str) -> None:
    """The pool's figures (``Engine.pool_figures``): sequential requests to one host make one
    connection and reuse it, a second host is counted apart, a request on the wire keeps its
    connection in use, a closed engine raises."""
    from conftest import wait_until
    port = _port(base_url)
    e = courier.Engine(temporary_store=True, resolve={f"other.test:{port}": "127.0.0.1"})
    with e:
        assert e.pool_figures().hosts == []
        for _ in range(3):
            e.get(f"http://127.0.0.1:{port}/echo")
        e.get(f"http://other.test:{port}/echo")
        f = e.pool_figures()
        assert f[f"http://127.0.0.1:{port}"] == courier.PoolHost(f"http://127.0.0.1:{port}", open=1, idle=1,
                                                                 in_use=0, opened=1, reused=2)
        assert f[f"http://other.test:{port}"] == courier.PoolHost(f"http://other.test:{port}", open=1, idle=1,
                                                                  in_use=0, opened=1, reused=0)
        assert f.total == courier.PoolHost(None, open=2, idle=2, in_use=0, opened=2, reused=2)
        assert f.get("http://nowhere.test:1") is None
        slow = e.send_async("GET", f"http://127.0.0.1:{port}/delay/1200")
        assert wait_until(lambda: e.pool_figures().total.in_use == 1)
        assert slow.result().status == 200
        assert e.pool_figures().total.in_use == 0
    with pytest.raises(courier.EngineClosed):
        e.pool_figures()
