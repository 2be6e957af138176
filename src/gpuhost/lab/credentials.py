"""Keys, certificates and secrets a lab hands out: all generated per lab, all 0600."""

from __future__ import annotations

import datetime
import ipaddress
import os
import secrets
import uuid
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class NodeTls:
    cert_pem: bytes
    key_pem: bytes


@dataclass(frozen=True)
class CertificateAuthority:
    cert_pem: bytes
    key: ec.EllipticCurvePrivateKey

    def issue(self, node: str, address: str) -> NodeTls:
        """A server certificate for the node's API on ``address:8006``."""
        key = ec.generate_private_key(ec.SECP256R1())
        ca_cert = x509.load_pem_x509_certificate(self.cert_pem)
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(
                x509.Name(
                    [
                        x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "PVE Cluster Node"),
                        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Proxmox Virtual Environment"),
                        x509.NameAttribute(NameOID.COMMON_NAME, f"{node}.lab"),
                    ]
                )
            )
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName(node), x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address(address))]
                ),
                critical=False,
            )
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(self.key, hashes.SHA256())
        )
        return NodeTls(
            cert_pem=cert.public_bytes(serialization.Encoding.PEM),
            key_pem=key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
            ),
        )


def new_ca() -> CertificateAuthority:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"gpuhost lab CA {uuid.uuid4()}")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(key, hashes.SHA256())
    )
    return CertificateAuthority(cert_pem=cert.public_bytes(serialization.Encoding.PEM), key=key)


def ssh_keygen(path: Path, comment: str) -> None:
    """An ed25519 key pair at ``path`` (OpenSSH private key, 0600) and ``path.pub``, like
    ``ssh-keygen -t ed25519 -N ''`` writes them, without a process per key."""
    key = ed25519.Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    write_secret(path, private)
    path.with_name(path.name + ".pub").write_bytes(public + f" {comment}\n".encode())


def write_secret(path: Path, content: str | bytes) -> None:
    """Write a file readable by root only, never through a world-readable moment."""
    data = content.encode() if isinstance(content, str) else content
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.chmod(path, 0o600)


def new_token_secret() -> str:
    """PVE API token secrets are UUIDs."""
    return str(uuid.uuid4())


def new_password() -> str:
    return secrets.token_urlsafe(18)
