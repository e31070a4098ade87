"""TFRecord files and tf.train.Example protos, written without TensorFlow.

Data preparation workers (local processes, Beam workers on a cluster) only write records; importing
TensorFlow would cost each of them seconds and hundreds of MB for nothing. A TFRecord is
`length (uint64 LE) | masked CRC32C of length | bytes | masked CRC32C of bytes`; a tf.train.Example
is built with the `protobuf` runtime TensorFlow uses, from the same message definition. The bytes equal what
`tf.io.TFRecordWriter` and `tf.train.Example.SerializeToString(deterministic=True)` produce (tested),
GZIP included (zlib with TensorFlow's settings).

Example:
    encode = example_encoder({"input_ids": ("int64", 4), "weights": ("float", 2)})
    with RecordWriter(open("out.tfrecord", "wb"), compression="gzip") as writer:
        writer.write(encode({"input_ids": [5, 6, 7, 0], "weights": [1.0, 0.0]}))
"""

from __future__ import annotations

import struct
import zlib
from typing import BinaryIO, Callable, Mapping, Sequence

from albert_tf.utils.validation import require_choice

try:  # the C implementation (SSE4.2 where the CPU has it); pure Python below is ~100x slower
    from google_crc32c import value as _crc32c
except ImportError:  # pragma: no cover - google-crc32c is a dependency
    _crc32c = None

FEATURE_KINDS = ("int64", "float", "bytes")
# What a feature layout maps each name to: (kind, number of values).
FeatureLayout = Mapping[str, tuple[str, int]]


def _crc32c_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli) of `data`."""
    if _crc32c is not None:
        return _crc32c(data)
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    """The CRC TFRecord stores: rotated right by 15 bits plus a constant (TensorFlow's crc32c::Mask)."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame_record(data: bytes) -> bytes:
    """`data` as one TFRecord: length, its masked CRC, the bytes, their masked CRC."""
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked_crc32c(length)) + data + struct.pack("<I", masked_crc32c(data))


class RecordWriter:
    """Writes TFRecords to a binary file object (a local file, or a Beam FileSystems stream).

    `compression="gzip"` compresses as TensorFlow's GZIP option does (zlib, default level, memory
    level 9, gzip header without name or time), so the files are byte-identical to its writer's.
    The file object is closed by `close()`.
    """

    def __init__(self, file: BinaryIO, compression: str = "none"):
        if compression not in ("none", "gzip"):
            raise ValueError(f"compression must be 'none' or 'gzip', got {compression!r}")
        self._file = file
        self._compressor = (
            zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, zlib.MAX_WBITS + 16, 9)
            if compression == "gzip"
            else None
        )

    def write(self, data: bytes) -> None:
        framed = frame_record(data)
        self._file.write(self._compressor.compress(framed) if self._compressor else framed)

    def close(self) -> None:
        if self._compressor is not None:
            self._file.write(self._compressor.flush())
            self._compressor = None
        self._file.close()

    def __enter__(self) -> "RecordWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_records(file: BinaryIO, cut_short_ok: bool = False) -> list[bytes]:
    """The payloads of an uncompressed TFRecord stream, CRCs checked (for tests and small tools).

    With `cut_short_ok`, a stream that ends inside its last record (a writer killed mid-write, such
    as a killed run's TensorBoard event file) gives the records before it instead of an error."""
    records = []
    while header := file.read(12):
        if len(header) < 12:
            if cut_short_ok:
                break
            raise ValueError("TFRecord stream ends inside a header")
        (length,) = struct.unpack("<Q", header[:8])
        if struct.unpack("<I", header[8:])[0] != masked_crc32c(header[:8]):
            raise ValueError("bad TFRecord length CRC")
        data = file.read(length)
        footer = file.read(4)
        if cut_short_ok and (len(data) < length or len(footer) < 4):
            break
        if len(data) < length or len(footer) < 4 or struct.unpack("<I", footer)[0] != masked_crc32c(data):
            raise ValueError("truncated or corrupted TFRecord")
        records.append(data)
    return records


def _example_class():
    """tf.train.Example's message class, built from its .proto definition in a private pool.

    The same message as TensorFlow's (tensorflow/core/example/example.proto and feature.proto),
    serialized by the same protobuf runtime, without importing TensorFlow.
    """
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    field = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(
        name="albert_tf/data/tfrecord/example.proto", package="tensorflow", syntax="proto3"
    )

    def message(name, fields, parent=None):
        added = (parent.nested_type if parent is not None else proto.message_type).add(name=name)
        for number, (field_name, kind, type_name, label) in enumerate(fields, start=1):
            entry = added.field.add(name=field_name, number=number, type=kind, label=label)
            if type_name:
                entry.type_name = type_name
        return added

    optional, repeated = field.LABEL_OPTIONAL, field.LABEL_REPEATED
    message("BytesList", [("value", field.TYPE_BYTES, None, repeated)])
    message("FloatList", [("value", field.TYPE_FLOAT, None, repeated)])
    message("Int64List", [("value", field.TYPE_INT64, None, repeated)])
    feature = message(
        "Feature",
        [
            ("bytes_list", field.TYPE_MESSAGE, ".tensorflow.BytesList", optional),
            ("float_list", field.TYPE_MESSAGE, ".tensorflow.FloatList", optional),
            ("int64_list", field.TYPE_MESSAGE, ".tensorflow.Int64List", optional),
        ],
    )
    feature.oneof_decl.add(name="kind")
    for entry in feature.field:
        entry.oneof_index = 0
    features = message("Features", [("feature", field.TYPE_MESSAGE, ".tensorflow.Features.FeatureEntry", repeated)])
    map_entry = message(
        "FeatureEntry",
        [("key", field.TYPE_STRING, None, optional), ("value", field.TYPE_MESSAGE, ".tensorflow.Feature", optional)],
        parent=features,
    )
    map_entry.options.map_entry = True
    message("Example", [("features", field.TYPE_MESSAGE, ".tensorflow.Features", optional)])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("tensorflow.Example"))


_LIST_FIELDS = {"int64": "int64_list", "float": "float_list", "bytes": "bytes_list"}


def example_builder(layout: FeatureLayout, example_class=None) -> Callable[[Mapping], object]:
    """A function turning a dict of value lists into a tf.train.Example message.

    The keys must be exactly the layout's and each list (or scalar, or numpy array) must have the
    layout's length, so what is written always parses with the matching `tf.io.FixedLenFeature`
    spec. The message is of `example_class`: this module's TensorFlow-free class by default, or
    TensorFlow's own `tf.train.Example` (`albert_tf.data.features` passes it); both are the same message.
    """
    for name, (kind, _) in layout.items():
        require_choice(f"feature {name!r}: kind", kind, FEATURE_KINDS)
    example_class = example_class or _example_class()
    plan = [(name, _LIST_FIELDS[kind], length) for name, (kind, length) in sorted(layout.items())]
    names = frozenset(layout)

    def build(values: Mapping):
        if len(values) != len(names) or not names.issuperset(values):
            missing, unexpected = names - set(values), set(values) - names
            raise ValueError(
                f"features do not match the spec: missing {sorted(missing)}, unexpected {sorted(unexpected)}"
            )
        example = example_class()
        features = example.features.feature
        for name, field, length in plan:
            value = values[name]
            items = value.tolist() if hasattr(value, "tolist") else value  # numpy arrays and scalars
            if isinstance(items, (int, float, bytes, str)):
                items = [items]
            if len(items) != length:
                raise ValueError(f"feature {name!r} has {len(items)} values, the spec wants {length}")
            getattr(features[name], field).value.extend(items)
        return example

    return build


def example_encoder(layout: FeatureLayout) -> Callable[[Mapping], bytes]:
    """`example_builder(layout)`, serialized: map entries in key order, as deterministic protobuf
    serialization writes them, so the bytes are reproducible."""
    build = example_builder(layout)
    return lambda values: build(values).SerializeToString(deterministic=True)
