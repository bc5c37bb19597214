"""The protobuf wire format, read only: enough to walk the kubelet's PodResources answer.

Four messages of the kubelet's podresources v1 API are read, each for two or
three fields (`POD_RESOURCES` below, from its api.proto); everything else is
skipped by wire type, so the fields a newer kubelet adds (cpu_ids, memory, DRA
claims) are stepped over. A length or tag that runs past its message raises
WireError: a cut or foreign answer is refused whole, never half-read.
"""

from __future__ import annotations

from typing import Any

__all__ = ["WireError", "fields", "decode"]

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5
_FIXED = {_I64: 8, _I32: 4}
_MAX_DEPTH = 8  # the schema below is four deep; a deeper one is not an answer we read

# message name -> {field number: (name, kind)}; kind is "str" or another message's name. Every field here is
# `repeated` or a scalar read last-wins, as protobuf itself does. Field numbers from the kubelet's
# pkg/apis/podresources/v1/api.proto.
POD_RESOURCES = {
    "ListPodResourcesResponse": {1: ("pod_resources", "PodResources")},
    "PodResources": {1: ("name", "str"), 2: ("namespace", "str"), 3: ("containers", "ContainerResources")},
    "ContainerResources": {1: ("name", "str"), 2: ("devices", "ContainerDevices")},
    "ContainerDevices": {1: ("resource_name", "str"), 2: ("device_ids", "str")},
}
_REPEATED = {"pod_resources", "containers", "devices", "device_ids"}


class WireError(ValueError):
    """The bytes are not a protobuf message of the expected shape."""


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise WireError(f"a varint runs past the end at byte {pos}")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift >= 64:
            raise WireError(f"a varint longer than 10 bytes at byte {pos}")


def fields(data: bytes):
    """(field number, wire type, value) of each field of one message: int for varints, bytes otherwise."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise WireError(f"field number 0 at byte {pos}")
        value: int | bytes
        if wire == _VARINT:
            value, pos = _varint(data, pos)
        elif wire == _LEN:
            size, pos = _varint(data, pos)
            if pos + size > len(data):
                raise WireError(f"field {number}: {size} bytes promised, {len(data) - pos} left")
            value, pos = data[pos : pos + size], pos + size
        elif wire in _FIXED:
            if pos + _FIXED[wire] > len(data):
                raise WireError(f"field {number}: a fixed-size value runs past the end")
            value, pos = data[pos : pos + _FIXED[wire]], pos + _FIXED[wire]
        else:  # 3 and 4 (groups) are proto2 only; 6 and 7 do not exist
            raise WireError(f"field {number}: wire type {wire} is not in proto3")
        yield number, wire, value


def decode(
    data: bytes, message: str = "ListPodResourcesResponse", schema: dict = POD_RESOURCES, _depth: int = 0
) -> dict:
    """`message` as a dict of the fields `schema` names (repeated ones as lists); raises WireError."""
    if _depth > _MAX_DEPTH:
        raise WireError("messages nested deeper than the schema")
    known = schema[message]
    out: dict[str, Any] = {}
    for name, kind in known.values():
        out[name] = [] if name in _REPEATED else ("" if kind == "str" else {})
    for number, wire, value in fields(data):
        if number not in known:
            continue
        name, kind = known[number]
        if wire != _LEN:
            raise WireError(f"{message}.{name}: wire type {wire}, expected length-delimited")
        if kind == "str":
            try:
                item = value.decode("utf-8")
            except UnicodeDecodeError as err:
                raise WireError(f"{message}.{name}: not UTF-8 ({err.reason})") from None
        else:
            item = decode(value, kind, schema, _depth + 1)
        if name in _REPEATED:
            out[name].append(item)
        else:
            out[name] = item
    return out
