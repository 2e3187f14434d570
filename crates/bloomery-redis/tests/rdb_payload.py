"""Redis DUMP payloads of the module's values, taken apart and put back together: the
RDB length encoding, the module value's typed fields, the trailer (RDB version and the
CRC64 Redis checks), and bloomery's envelope checksums (docs/format.md), so a test can
change one field and still have Redis, and then the module, read what it sent."""
import struct

import xxhash

# CRC-64/Jones as in redis src/crc64.c: polynomial 0xad93d23594c935a9, reflected, init 0.
_POLY_REFLECTED = int(f"{0xad93d23594c935a9:064b}"[::-1], 2)
_TABLE = []
for _byte in range(256):
    _crc = _byte
    for _ in range(8):
        _crc = (_crc >> 1) ^ (_POLY_REFLECTED if _crc & 1 else 0)
    _TABLE.append(_crc)


def crc64(data: bytes) -> int:
    crc = 0
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc


assert crc64(b"123456789") == 0xE9C6D914C4B8D9CA  # redis src/crc64.c's test vector

# Module value opcodes (redis src/rdb.h).
OPCODE_EOF, OPCODE_UINT, OPCODE_DOUBLE, OPCODE_STRING = 0, 2, 4, 5
RDB_TYPE_MODULE_2 = 7


def encode_len(value: int, width: int = 0) -> bytes:
    """rdbSaveLen: the shortest form, or the form of `width` bytes (1, 2, 5 or 9) where the
    value fits it; Redis reads every form for every value."""
    shortest = 1 if value < 64 else 2 if value < 16384 else 5 if value <= 0xFFFFFFFF else 9
    width = max(width, shortest)
    if width == 1:
        return bytes([value])
    if width == 2:
        return bytes([0x40 | (value >> 8), value & 0xFF])
    if width == 5:
        return b"\x80" + value.to_bytes(4, "big")
    return b"\x81" + value.to_bytes(8, "big")


def decode_len(buf: bytes, pos: int):
    kind = buf[pos] >> 6
    if kind == 0:
        return buf[pos] & 0x3F, pos + 1
    if kind == 1:
        return ((buf[pos] & 0x3F) << 8) | buf[pos + 1], pos + 2
    if buf[pos] == 0x80:
        return int.from_bytes(buf[pos + 1:pos + 5], "big"), pos + 5
    if buf[pos] == 0x81:
        return int.from_bytes(buf[pos + 1:pos + 9], "big"), pos + 9
    raise ValueError(f"an encoded (compressed or integer) string at {pos}: DUMP with rdbcompression no")


class Value:
    """A module value: its type byte, module id and fields [("uint", n) | ("double", x) |
    ("string", b)]; the module id's low 10 bits are the type's encoding version."""

    def __init__(self, payload: bytes):
        body, version, crc = payload[:-10], payload[-10:-8], payload[-8:]
        assert crc64(payload[:-8]) == int.from_bytes(crc, "little")
        self.rdb_version = version
        assert body[0] == RDB_TYPE_MODULE_2
        self.module_id, pos = decode_len(body, 1)
        self.fields = []
        while True:
            opcode, pos = decode_len(body, pos)
            if opcode == OPCODE_EOF:
                break
            if opcode == OPCODE_UINT:
                value, pos = decode_len(body, pos)
                self.fields.append(("uint", value))
            elif opcode == OPCODE_DOUBLE:  # 8 bytes, little-endian (rdbSaveBinaryDoubleValue)
                self.fields.append(("double", struct.unpack("<d", body[pos:pos + 8])[0]))
                pos += 8
            elif opcode == OPCODE_STRING:
                length, pos = decode_len(body, pos)
                self.fields.append(("string", body[pos:pos + length]))
                pos += length
            else:
                raise ValueError(f"opcode {opcode}")
        assert pos == len(body)

    def body(self, fields=None, width: int = 0) -> bytes:
        """The RDB bytes of the value with these fields (every length in `width` form)."""
        out = bytearray([RDB_TYPE_MODULE_2]) + encode_len(self.module_id, 9)
        for kind, value in self.fields if fields is None else fields:
            if kind == "uint":
                out += encode_len(OPCODE_UINT, width) + encode_len(value, width)
            elif kind == "double":
                out += encode_len(OPCODE_DOUBLE, width) + struct.pack("<d", value)
            elif kind == "string":
                out += encode_len(OPCODE_STRING, width) + encode_len(len(value), width) + value
            else:  # raw bytes, for a field made wrong on purpose
                out += value
        return bytes(out + encode_len(OPCODE_EOF, width))

    def module_data_offset(self) -> int:
        """Where the module's own fields start: what changes from here on reaches rdb_load."""
        return 1 + 9

    def envelope(self) -> bytes:
        """The envelope of a filter's value (kind 0, its length, then its pieces as saved:
        the header, then the payload from the filter's memory), joined."""
        kind, total, *pieces = self.fields
        assert kind == ("uint", 0) and pieces and all(piece[0] == "string" for piece in pieces)
        envelope = b"".join(piece for _, piece in pieces)
        assert total == ("uint", len(envelope))
        return envelope

    def payload(self, body: bytes) -> bytes:
        """A DUMP payload Redis accepts for `body`: RDB version, then CRC64 of all before."""
        data = body + self.rdb_version
        return data + crc64(data).to_bytes(8, "little")


def envelope_with_checksums(envelope: bytes) -> bytes:
    """The envelope with both xxh3-64 checksums recomputed (docs/format.md), as far as its
    (possibly changed) lengths allow: the changed field then reaches the parameter checks."""
    data = bytearray(envelope)
    if len(data) < 32:
        return bytes(data)
    params_len = int.from_bytes(data[12:16], "little")
    header_len = (32 + params_len + 8 + 63) // 64 * 64
    if header_len > len(data):
        return bytes(data)
    payload = bytes(data[header_len:])
    data[24:32] = xxhash.xxh3_64_intdigest(payload).to_bytes(8, "little")
    data[header_len - 8:header_len] = xxhash.xxh3_64_intdigest(bytes(data[:header_len - 8])).to_bytes(8, "little")
    return bytes(data)
