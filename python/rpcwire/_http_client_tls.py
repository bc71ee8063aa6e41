"""The HTTP clients' TLS (``verify=``: :data:`Verify`) and proxies (``proxy=``, the environment's as requests and
httpx read them: :func:`_find_proxy`), and what a refused certificate or tunnel says."""

from __future__ import annotations

import base64
import os
import ssl
import urllib.parse
import urllib.request
from typing import TYPE_CHECKING, Union

from rpcwire._types import ConnectionFailed

if TYPE_CHECKING:
    from rpcwire._http_client_wire import _ResponseReader

Verify = Union[bool, str, "os.PathLike[str]", ssl.SSLContext]
"""What ``verify=`` takes: ``True`` (the system's trust store), ``False`` (no check), a CA bundle's path (a
PEM file, or a directory of hashed certificates), or an ``ssl.SSLContext`` used as it is."""


def _tls_context(verify: Verify) -> ssl.SSLContext:
    """The context of ``verify=`` (see :data:`Verify`); a CA path that cannot be read raises here."""
    if isinstance(verify, ssl.SSLContext):
        return verify
    if verify is True:
        return ssl.create_default_context()
    if verify is False:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    if isinstance(verify, (str, os.PathLike)) and not isinstance(verify, bool):
        path = os.fspath(verify)
        if os.path.isdir(path):
            return ssl.create_default_context(capath=path)
        return ssl.create_default_context(cafile=path)
    raise TypeError(f"verify must be a bool, a CA bundle's path or an ssl.SSLContext, not {verify!r}")


def _untrusted(exc: ssl.SSLCertVerificationError, host: str) -> ssl.SSLCertVerificationError:
    """The certificate check's failure, saying what to do about it (same type, ``verify_code`` and message)."""
    why = exc.verify_message or exc.strerror or str(exc)
    error = ssl.SSLCertVerificationError(
        exc.errno,
        f"certificate verify failed for {host}: {why} (a server of your own, or a private CA: pass verify= the CA"
        " bundle's path or an ssl.SSLContext that trusts it; verify=False checks nothing)",
    )
    error.verify_code, error.verify_message = exc.verify_code, exc.verify_message
    return error


class _Proxy:
    """The HTTP proxy a client goes through: ``host``, ``port``, ``authorization`` (the ``Proxy-Authorization``
    header's value, from the URL's user and password, or ``None``) and ``source`` (``proxy=`` or the
    environment variable it came from), for messages."""

    def __init__(self, url: str, source: str) -> None:
        parts = urllib.parse.urlsplit(url if "://" in url else f"http://{url}")  # "host:3128", as curl takes it
        if parts.scheme != "http":
            raise ValueError(
                f"{source}={_without_password(url)!r}: rpcwire's HTTP clients go through an http:// proxy only (a"
                f" {parts.scheme}:// one needs session=, an httpx client); NO_PROXY or trust_env=False go direct"
            )
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.source = source
        self.shown = f"http://{self.host}:{self.port}"
        self.authorization: str | None = None
        if parts.username is not None:
            user = urllib.parse.unquote(parts.username)
            password = urllib.parse.unquote(parts.password or "")
            self.authorization = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


def _without_password(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    return url.replace(f":{parts.password}@", ":***@", 1)


def _find_proxy(scheme: str, host: str, port: int, proxy: str | None, trust_env: bool) -> _Proxy | None:
    """``proxy=`` if given; else, with ``trust_env``, the environment's proxy for the URL as requests and
    httpx find it: ``<scheme>_proxy`` (either case, the lower-case one first), else ``all_proxy``, unless
    ``no_proxy`` names the host (``urllib.request.proxy_bypass``)."""
    if proxy is not None:
        return _Proxy(proxy, "proxy=")
    if not trust_env:
        return None
    proxies = urllib.request.getproxies()
    url = proxies.get(scheme) or proxies.get("all")
    if (
        not url
        or urllib.request.proxy_bypass(host)
        or (":" not in host and urllib.request.proxy_bypass(f"{host}:{port}"))
    ):
        return None
    names = [f"{scheme}_proxy", f"{scheme.upper()}_PROXY", "all_proxy", "ALL_PROXY"]
    source = next((name for name in names if os.environ.get(name) == url), f"{scheme.upper()}_PROXY")
    return _Proxy(url, source)


def _tunnel_refused(proxy: _Proxy, target: str, reader: _ResponseReader) -> ConnectionFailed:
    return ConnectionFailed(
        f"the proxy {proxy.shown} (from {proxy.source}) refused the tunnel to {target}:"
        f" {reader.status} {reader.reason}".rstrip()
    )
