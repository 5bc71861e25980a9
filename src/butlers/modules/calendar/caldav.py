"""A CalDAV client (RFC 4791 over WebDAV, RFC 4918; collection sync, RFC 6578).

Only what the module needs: discovery of the owner's calendars (principal, home set,
collections), sync by token or by comparing ETags, multiget, and writes guarded by ETags
(`If-Match` on change and delete, `If-None-Match: *` on create), so a concurrent edit on
the server is a `Conflict`, never overwritten. Every request has a deadline and every
answer a size bound.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import unquote, urljoin, urlsplit

import httpx2 as httpx

DAV = "DAV:"
CALDAV = "urn:ietf:params:xml:ns:caldav"
CS = "http://calendarserver.org/ns/"
ICAL = "http://apple.com/ns/ical/"
MAX_BODY = 32 * 1024 * 1024
MULTIGET_BATCH = 200
NS = {"d": DAV, "c": CALDAV, "cs": CS, "i": ICAL}


class CalDavError(Exception):
    """The server refused or could not be reached; the message says which and where."""


class Conflict(CalDavError):
    """The resource changed on the server since it was read (412 Precondition Failed)."""


class Unsupported(CalDavError):
    """The server does not answer this kind of request (a report it lacks)."""


class SyncTokenInvalid(CalDavError):
    """The server no longer honours the sync token: a full comparison is needed."""


@dataclass(frozen=True, slots=True)
class Collection:
    href: str
    name: str
    color: str | None
    ctag: str | None
    sync_token: str | None
    writable: bool


@dataclass(frozen=True, slots=True)
class Resource:
    href: str
    etag: str | None
    ics: str


def _tag(ns: str, name: str) -> str:
    return f"{{{ns}}}{name}"


def _propfind_body(props: Sequence[tuple[str, str]]) -> bytes:
    inner = "".join(f"<{p}:{n}/>" for p, n in props)
    spaces = " ".join(f'xmlns:{k}="{v}"' for k, v in NS.items())
    text = f'<?xml version="1.0"?><d:propfind {spaces}><d:prop>{inner}</d:prop></d:propfind>'
    return text.encode()


def _text(element: ET.Element | None) -> str | None:
    if element is None or element.text is None:
        return None
    return element.text.strip() or None


class BearerAuth(httpx.Auth):
    """`Authorization: Bearer` with a token fetched before each request (an OAuth access
    token, refreshed by `token` when it nears expiry)."""

    def __init__(self, token: Callable[[], Awaitable[str]]) -> None:
        self._token = token

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        request.headers["Authorization"] = f"Bearer {await self._token()}"
        yield request


class CalDavClient:
    def __init__(
        self,
        url: str,
        username: str | None,
        password: str | None,
        timeout: float = 30.0,
        token: Callable[[], Awaitable[str]] | None = None,
    ) -> None:
        """Basic auth with `username`/`password`, or a bearer `token` when given."""
        self.url = url if url.endswith("/") else url + "/"
        auth: httpx.Auth | None = None
        if token is not None:
            auth = BearerAuth(token)
        elif username:
            auth = httpx.BasicAuth(username, password or "")
        self._http = httpx.AsyncClient(auth=auth, timeout=timeout, follow_redirects=True)

    async def aclose(self) -> None:
        await self._http.aclose()

    def absolute(self, href: str) -> str:
        return urljoin(self.url, href)

    async def _request(
        self,
        method: str,
        href: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        ok: Sequence[int] = (200, 201, 204, 207),
    ) -> httpx.Response:
        url = self.absolute(href)
        all_headers = {"Content-Type": "application/xml; charset=utf-8", **(headers or {})}
        try:
            response = await self._http.request(method, url, content=body, headers=all_headers)
        except httpx.HTTPError as exc:
            raise CalDavError(f"CalDAV {method} {url}: {type(exc).__name__}: {exc}") from exc
        if len(response.content) > MAX_BODY:
            raise CalDavError(f"CalDAV {method} {url}: answer larger than {MAX_BODY} bytes")
        if response.status_code == 412:
            raise Conflict(f"{href} changed on the server since it was read")
        if response.status_code not in ok:
            raise CalDavError(
                f"CalDAV {method} {url}: HTTP {response.status_code} {response.text[:200].strip()}"
            )
        return response

    async def _multistatus(
        self, method: str, href: str, body: bytes, depth: str
    ) -> list[ET.Element]:
        response = await self._request(method, href, body, {"Depth": depth})
        try:
            root = ET.fromstring(response.content)
        except ET.ParseError as exc:
            raise CalDavError(f"CalDAV {method} {href}: not XML: {exc}") from exc
        return root.findall("d:response", NS)

    async def _prop(self, href: str, prop: tuple[str, str]) -> str | None:
        responses = await self._multistatus("PROPFIND", href, _propfind_body([prop]), "0")
        for response in responses:
            found = response.find(f".//{prop[0]}:{prop[1]}/d:href", NS)
            if found is not None and found.text:
                return found.text.strip()
        return None

    async def discover(self) -> list[Collection]:
        """The calendars (collections of events) of the principal behind `url`."""
        principal = await self._prop(self.url, ("d", "current-user-principal"))
        home = await self._prop(principal, ("c", "calendar-home-set")) if principal else None
        body = _propfind_body(
            [
                ("d", "resourcetype"),
                ("d", "displayname"),
                ("d", "sync-token"),
                ("d", "current-user-privilege-set"),
                ("cs", "getctag"),
                ("i", "calendar-color"),
                ("c", "supported-calendar-component-set"),
            ]
        )
        found = []
        for response in await self._multistatus("PROPFIND", home or self.url, body, "1"):
            href = _text(response.find("d:href", NS))
            prop = response.find("d:propstat/d:prop", NS)
            if href is None or prop is None or prop.find("d:resourcetype/c:calendar", NS) is None:
                continue
            components = prop.findall("c:supported-calendar-component-set/c:comp", NS)
            if components and "VEVENT" not in {c.get("name") for c in components}:
                continue
            privileges = prop.find("d:current-user-privilege-set", NS)
            writable = privileges is None or any(
                privileges.find(f".//d:{name}", NS) is not None
                for name in ("write", "write-content", "all")
            )
            fallback = unquote(href.rstrip("/")).rsplit("/", 1)[-1]
            found.append(
                Collection(
                    href=href,
                    name=_text(prop.find("d:displayname", NS)) or fallback,
                    color=_text(prop.find("i:calendar-color", NS)),
                    ctag=_text(prop.find("cs:getctag", NS)),
                    sync_token=_text(prop.find("d:sync-token", NS)),
                    writable=writable,
                )
            )
        return found

    async def sync_collection(
        self, href: str, token: str | None
    ) -> tuple[dict[str, str | None], list[str], str | None]:
        """Changed members (href → ETag), removed members, and the new token (RFC 6578)."""
        body = (
            '<?xml version="1.0"?><d:sync-collection xmlns:d="DAV:">'
            f"<d:sync-token>{token or ''}</d:sync-token><d:sync-level>1</d:sync-level>"
            "<d:prop><d:getetag/></d:prop></d:sync-collection>"
        ).encode()
        try:
            response = await self._request("REPORT", href, body, {"Depth": "1"})
        except CalDavError as exc:
            if token and ("valid-sync-token" in str(exc) or " 403 " in str(exc)):
                raise SyncTokenInvalid(str(exc)) from exc
            raise
        root = ET.fromstring(response.content)
        changed: dict[str, str | None] = {}
        removed: list[str] = []
        base = urlsplit(self.absolute(href)).path
        for item in root.findall("d:response", NS):
            member = _text(item.find("d:href", NS))
            if member is None or urlsplit(self.absolute(member)).path == base:
                continue
            status = _text(item.find("d:status", NS)) or ""
            if " 404 " in f"{status} ":
                removed.append(member)
            else:
                changed[member] = _text(item.find("d:propstat/d:prop/d:getetag", NS))
        return changed, removed, _text(root.find("d:sync-token", NS))

    async def etags(self, href: str) -> dict[str, str | None]:
        """Every member of a collection with its ETag (the fallback when sync is missing)."""
        base = urlsplit(self.absolute(href)).path
        members = {}
        body = _propfind_body([("d", "getetag"), ("d", "resourcetype")])
        for item in await self._multistatus("PROPFIND", href, body, "1"):
            member = _text(item.find("d:href", NS))
            if member is None or urlsplit(self.absolute(member)).path == base:
                continue
            if item.find("d:propstat/d:prop/d:resourcetype/d:collection", NS) is not None:
                continue
            members[member] = _text(item.find("d:propstat/d:prop/d:getetag", NS))
        return members

    async def collection_tags(self, href: str) -> tuple[str | None, str | None]:
        """(ctag, sync-token) of one collection."""
        body = _propfind_body([("cs", "getctag"), ("d", "sync-token")])
        for item in await self._multistatus("PROPFIND", href, body, "0"):
            prop = item.find("d:propstat/d:prop", NS)
            if prop is not None:
                return _text(prop.find("cs:getctag", NS)), _text(prop.find("d:sync-token", NS))
        return None, None

    async def multiget(self, href: str, members: Sequence[str]) -> list[Resource]:
        """The calendar data of `members` (in batches)."""
        found: list[Resource] = []
        for offset in range(0, len(members), MULTIGET_BATCH):
            batch = members[offset : offset + MULTIGET_BATCH]
            hrefs = "".join(f"<d:href>{_escape(m)}</d:href>" for m in batch)
            body = (
                '<?xml version="1.0"?><c:calendar-multiget xmlns:d="DAV:" '
                f'xmlns:c="{CALDAV}"><d:prop><d:getetag/><c:calendar-data/></d:prop>'
                f"{hrefs}</c:calendar-multiget>"
            ).encode()
            for item in await self._multistatus("REPORT", href, body, "1"):
                member = _text(item.find("d:href", NS))
                data = item.find("d:propstat/d:prop/c:calendar-data", NS)
                if member is None or data is None or not data.text:
                    continue
                etag = _text(item.find("d:propstat/d:prop/d:getetag", NS))
                found.append(Resource(member, etag, data.text))
        return found

    async def free_busy(self, href: str, start: datetime, end: datetime) -> str:
        """The VFREEBUSY the server computes for a calendar over [start, end) (RFC 4791
        free-busy-query); `Unsupported` when the server does not offer the report."""
        body = (
            f'<?xml version="1.0"?><c:free-busy-query xmlns:c="{CALDAV}">'
            f'<c:time-range start="{_utc(start)}" end="{_utc(end)}"/></c:free-busy-query>'
        ).encode()
        refused = (400, 403, 405, 415, 422, 501)
        response = await self._request("REPORT", href, body, {"Depth": "1"}, (200, 207, *refused))
        kind = response.headers.get("content-type", "")
        if response.status_code in refused or "text/calendar" not in kind:
            raise Unsupported(
                f"CalDAV free-busy-query on {href}: HTTP {response.status_code} "
                f"{kind or 'no content type'} {response.text[:200].strip()}"
            )
        return response.text

    async def get(self, href: str) -> Resource:
        response = await self._request("GET", href, ok=(200,))
        return Resource(href, response.headers.get("etag"), response.text)

    async def put(self, href: str, ics: str, etag: str | None) -> str | None:
        """Create (`etag` None: only if absent) or replace (only if still `etag`)."""
        headers = {"Content-Type": "text/calendar; charset=utf-8"}
        headers["If-Match" if etag else "If-None-Match"] = etag or "*"
        response = await self._request("PUT", href, ics.encode(), headers, ok=(200, 201, 204))
        new_etag = response.headers.get("etag")
        if new_etag is None or new_etag.startswith("W/"):
            new_etag = (await self.get(href)).etag
        return new_etag

    async def delete(self, href: str, etag: str | None) -> None:
        headers = {"If-Match": etag} if etag else {}
        await self._request("DELETE", href, None, headers, ok=(200, 204, 404))


def _utc(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
