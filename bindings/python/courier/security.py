"""Security policies (``courier_security``), per engine and per request: pinning, the two
verification switches, a CA file, a client certificate. The policy is a plain value; the C policy
is built for each use and copied by the core, which decides what every field means."""
from __future__ import annotations

import os
from ctypes import byref, c_void_p
from dataclasses import dataclass
from typing import Optional, Union

from ._enums import CEnum
from ._lib import lib
from .errors import check, coerce

__all__ = ["Security", "PinningMode"]

PathArg = Union[str, "os.PathLike[str]", None]


class PinningMode(CEnum):
    """``courier_pinning_mode``: how the server's certificate is pinned."""
    __c_enum__ = ("courier_pinning_mode", "COURIER_PINNING_")
    NONE = 0
    PUBLIC_KEY = 1
    CERTIFICATE = 2


def _p(path: PathArg) -> Optional[bytes]:
    return os.fsencode(path) if path is not None else None


@dataclass(frozen=True)
class Security:
    """A security policy (HLNetworking's ``HLSecurityPolicyConfig``): ``Engine(security=)`` for every
    request, ``Request(security=)`` for one (replacing the whole of the engine's).

    pinning: :class:`PinningMode` (or "none", "public_key", "certificate"); pins: for PUBLIC_KEY
    libcurl's "sha256//BASE64" (";"-separated) or a public key file, for CERTIFICATE a PEM file of
    the certificates the chain must hold (:class:`courier.PinningError` otherwise).
    allow_invalid_certificates and validates_domain_name: the two checks, apart.
    ca_file: PEM CA certificates instead of the system's.
    client_certificate, client_key (None: in the certificate's file), client_key_password: mutual TLS
    (PEM, or PKCS#12 ".p12"/".pfx"); a key that does not open fails with
    :class:`courier.ClientCertificateError`.
    requires_certificate_status: the server must staple a good OCSP response for its certificate
    (OCSP stapling), else :class:`courier.TLSError` before anything is sent (``curl_code`` 91)."""
    pinning: Union[PinningMode, str, int] = PinningMode.NONE
    pins: PathArg = None
    allow_invalid_certificates: bool = False
    validates_domain_name: bool = True
    ca_file: PathArg = None
    client_certificate: PathArg = None
    client_key: PathArg = None
    client_key_password: Optional[str] = None
    requires_certificate_status: bool = False

    def _new(self) -> int:
        """A new ``courier_security *`` (the caller frees it with courier_security_free)."""
        out = c_void_p()
        check(lib.courier_security_new(byref(out)))
        s = out.value or 0
        try:
            mode = coerce(PinningMode, self.pinning, "pinning")
            if mode != PinningMode.NONE:
                check(lib.courier_security_set_pinning(s, mode, _p(self.pins)), arg="pins")
            check(lib.courier_security_set_allow_invalid_certificates(s, 1 if self.allow_invalid_certificates else 0))
            check(lib.courier_security_set_validates_domain_name(s, 1 if self.validates_domain_name else 0))
            if self.ca_file is not None:
                check(lib.courier_security_set_ca_file(s, _p(self.ca_file)), arg="ca_file")
            if self.client_certificate is not None:
                check(lib.courier_security_set_client_certificate(
                    s, _p(self.client_certificate), _p(self.client_key),
                    self.client_key_password.encode() if self.client_key_password is not None else None),
                      arg="client_certificate")
            if self.requires_certificate_status:
                check(lib.courier_security_set_requires_certificate_status(s, 1), arg="requires_certificate_status")
        except BaseException:
            lib.courier_security_free(s)
            raise
        return s

    def _apply(self, setter: object, target: int) -> None:
        """Builds the C policy, hands it to ``setter(target, policy)`` (which copies it), frees it."""
        s = self._new()
        try:
            check(setter(target, s), arg="security")  # type: ignore[operator]
        finally:
            lib.courier_security_free(s)
