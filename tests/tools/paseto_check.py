#!/usr/bin/python3
"""An independent PASETO v4.public implementation, written from the
specification (PAE, v4.public sign/verify) on PyNaCl, to cross-check the
tokens the C library makes and accepts.

  paseto_check.py verify PUBHEX TOKEN IMPLICIT [FOOTER]
      prints the payload and exits 0 when TOKEN verifies under the public
      key (64 hex characters) with the implicit assertion (and, when FOOTER
      is given, carries exactly that footer); exits 1 otherwise.
  paseto_check.py sign SEEDHEX PAYLOAD IMPLICIT [FOOTER]
      prints a v4.public token for PAYLOAD, signed with the Ed25519 key made
      from the 32-byte seed (64 hex characters).
"""
import base64
import binascii
import re
import struct
import sys

import nacl.exceptions
import nacl.signing

HEADER = b"v4.public."
B64URL = re.compile(rb"^[A-Za-z0-9_-]*$")


def le64(n):
    # the top bit is cleared, as the specification requires
    return struct.pack("<Q", n & 0x7FFFFFFFFFFFFFFF)


def pae(pieces):
    out = le64(len(pieces))
    for p in pieces:
        out += le64(len(p)) + p
    return out


def b64d(s):
    """strict base64url without padding: one spelling per value"""
    if not B64URL.match(s) or len(s) % 4 == 1:
        raise ValueError("not base64url")
    raw = base64.urlsafe_b64decode(s + b"=" * (-len(s) % 4))
    if b64e(raw) != s:
        raise ValueError("non-canonical base64url")
    return raw


def b64e(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=")


def verify(pub_hex, token, implicit, want_footer=None):
    pk = binascii.unhexlify(pub_hex)
    if len(pk) != 32:
        raise ValueError("public key is not 32 bytes")
    tok = token.encode()
    if not tok.startswith(HEADER):
        raise ValueError("not a v4.public token")
    parts = tok[len(HEADER):].split(b".")
    if len(parts) > 2:
        raise ValueError("too many parts")
    if len(parts) == 2 and parts[1] == b"":
        raise ValueError("empty footer part")
    sm = b64d(parts[0])
    footer = b64d(parts[1]) if len(parts) == 2 else b""
    if want_footer is not None and footer != want_footer.encode():
        raise ValueError("footer differs")
    if len(sm) < 64:
        raise ValueError("too short")
    m, sig = sm[:-64], sm[-64:]
    m2 = pae([HEADER, m, footer, implicit.encode()])
    nacl.signing.VerifyKey(pk).verify(m2, sig)
    return m


def sign(seed_hex, payload, implicit, footer=""):
    key = nacl.signing.SigningKey(binascii.unhexlify(seed_hex))
    m = payload.encode()
    f = footer.encode()
    sig = key.sign(pae([HEADER, m, f, implicit.encode()])).signature
    tok = HEADER + b64e(m + sig)
    if f:
        tok += b"." + b64e(f)
    return tok.decode()


def main(argv):
    if len(argv) in (5, 6) and argv[1] == "verify":
        try:
            m = verify(argv[2], argv[3], argv[4], argv[5] if len(argv) == 6 else None)
        except (ValueError, binascii.Error, nacl.exceptions.BadSignatureError,
                nacl.exceptions.ValueError, nacl.exceptions.TypeError) as e:
            print("paseto_check: refused: %s" % e, file=sys.stderr)
            return 1
        sys.stdout.buffer.write(m + b"\n")
        return 0
    if len(argv) in (5, 6) and argv[1] == "sign":
        print(sign(argv[2], argv[3], argv[4], argv[5] if len(argv) == 6 else ""))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
