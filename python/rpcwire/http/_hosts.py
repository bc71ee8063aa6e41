"""``allowed_hosts``: the names the server is known by, checked against a request's ``Host`` (the DNS-rebinding
defence; a request refused here is answered 421).

Under DNS rebinding a page of the attacker's site reaches a server on 127.0.0.1 under the attacker's own name: the
Origin and the Host are both that name, so the same-host Origin check passes. The Host is what gives it away: a
request that came over loopback must name a loopback host. The verdicts below are cached (a few distinct values in
practice; an lru_cache stays bounded whatever a client sends).
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Iterable

__all__ = ["Hosts"]


def _split_host(host: str) -> tuple[str, str | None] | None:
    """``(name, port)`` of a ``Host`` value (``name`` lowercased, an IPv6 literal without its brackets,
    ``port`` ``None`` when absent), or ``None`` when it is not ``host[:port]``."""
    host = host.strip(" \t").lower()
    if host.startswith("["):
        name, bracket, rest = host[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            return None
        port: str | None = rest[1:] if rest else None
    else:
        name, colon, port = host.partition(":")
        if not colon:
            port = None
    if not name or (port is not None and not (port.isdigit() and port.isascii())):
        return None
    return name, port


@functools.lru_cache(maxsize=256)
def _is_loopback(name: str) -> bool:
    """Whether ``name`` (an address, ``localhost``, or a ``Host`` value with its port) is a loopback one."""
    bare_ipv6 = not name.startswith("[") and name.count(":") > 1  # an address, never with a port
    split = (name.lower(), None) if bare_ipv6 else _split_host(name)
    if split is None:
        return False
    if split[0] == "localhost":
        return True
    try:
        address = ipaddress.ip_address(split[0])
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1, an IPv4 client of a dual-stack socket
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


_HOST_NAME = re.compile(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*\.?")


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


@functools.lru_cache(maxsize=256)
def _may_be_loopback(address: str) -> bool:
    """Whether a socket address a server reports (its own or the client's) may be a loopback one: a loopback
    address or ``localhost``, or one that cannot be read. Fails closed: PyPy's sockets made from an inherited
    file descriptor (``uvicorn --fd``, ``gunicorn -b fd://``, systemd socket activation) report undecoded bytes,
    and such an address must not let a rebound name through. An IP address, a host name, a Unix socket's path
    and ``""`` (a Unix socket's peer, as gunicorn reports it) are read as what they are."""
    if _is_loopback(address):
        return True
    readable = (
        address == ""
        or address.startswith("/")
        or _is_address(address)
        or _HOST_NAME.fullmatch(address.lower()) is not None
    )
    return not readable


class _HostRule:
    """One entry of ``allowed_hosts``: ``name`` (any port), ``name:port`` (that port only), ``*.domain``
    (any name under ``domain``, not ``domain`` itself, any port), IPv6 literals in brackets (``[::1]:8000``)."""

    __slots__ = ("name", "port", "subdomains")

    def __init__(self, entry: str) -> None:
        if not isinstance(entry, str):
            raise TypeError(f"allowed_hosts holds str, not {type(entry).__name__}")
        self.subdomains = entry.startswith("*.")
        host = entry[2:] if self.subdomains else entry
        split = _split_host(host)
        if split is None or not (
            (":" in split[0] and _is_address(split[0])) if host.startswith("[") else _HOST_NAME.fullmatch(split[0])
        ):
            raise ValueError(f"allowed_hosts: {entry!r} is not a host name, host:port, [IPv6]:port or *.domain")
        self.name, self.port = split

    def matches(self, name: str, port: str | None) -> bool:
        if self.port is not None and port != self.port:
            return False
        return name.endswith("." + self.name) if self.subdomains else name == self.name


class Hosts:
    """``allowed_hosts``: ``"auto"`` (a request that came over loopback, the server's or the client's address
    a loopback one, must name a loopback host: ``localhost``, ``127.0.0.1``, ``[::1]``, any port; other requests
    any host), a list of names (only those), or ``None``/``"*"`` (any)."""

    def __init__(self, allowed_hosts: Iterable[str] | str | None) -> None:
        self.any = allowed_hosts is None or allowed_hosts == "*"
        self.auto = allowed_hosts == "auto"
        self.rules: tuple[_HostRule, ...] = ()
        if isinstance(allowed_hosts, str) and not (self.any or self.auto):
            raise ValueError('allowed_hosts is a list of host names, "auto", "*" or None')
        if not (self.any or self.auto):
            assert allowed_hosts is not None and not isinstance(allowed_hosts, str)
            self.rules = tuple(_HostRule(entry) for entry in allowed_hosts)
            self._listed = functools.lru_cache(maxsize=256)(self._listed_uncached)

    def allowed(self, host: str | None, server: str | None, client: str | None) -> bool:
        """Whether a request with this ``Host`` (``None``: none sent), that came to the address ``server`` from
        ``client`` (each ``None`` when unknown), may be answered."""
        if self.any:
            return True
        if self.auto:
            local = (server is not None and _may_be_loopback(server)) or (
                client is not None and _may_be_loopback(client)
            )
            # No Host at all: not a browser (which always sends one), so not a rebinding.
            return not local or host is None or _is_loopback(host)
        return host is not None and self._listed(host)

    def _listed_uncached(self, host: str) -> bool:
        split = _split_host(host)
        return split is not None and any(rule.matches(*split) for rule in self.rules)
