"""Which Required checks test each requirement, and which planted violations prove them.

Edit this file when a check or a requirement is added; `python -m reference_tools.proof table`
regenerates docs/requirements.md and tests/test_requirement_table.py keeps both honest.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

MUTANTS = "reference_tools.proof.mutants"
DEFECTS = "tests.defective_adapters"
ENGINE = "tests.engine.receive_path_adapters"
SPEC_RULES = "tests.spec_rule_adapters"


@dataclass(frozen=True)
class Violation:
    """A planted violation: an implementation with one bug, and the checks it must fail."""

    name: str
    impl: str
    must_fail: tuple[str, ...]
    transport: str = "both"
    e2e: bool = False


@dataclass(frozen=True)
class Entry:
    checks: tuple[str, ...]       # fnmatch patterns over check ids
    violations: tuple[str, ...]   # keys of VIOLATIONS


def _v(module: str, name: str, *must_fail: str, transport: str = "both", e2e: bool = False) -> Violation:
    return Violation(name, f"{module}:{name}", tuple(must_fail), transport, e2e)


def _testee(mode: str, *must_fail: str) -> Violation:
    """The reference testee (spec/testee.md) with a planted encoder bug, over its subprocess protocol."""
    return Violation(f"testee --break {mode}", f"cmd:{sys.executable} -m reference_impl.testee --break {mode}",
                     tuple(must_fail), "msgpack")


VIOLATIONS: dict[str, Violation] = {v.name: v for v in (
    # -- messages and bytes
    _v(MUTANTS, "DropsTrailingDefaults", "Required.Bytes.AbortReq.MatchesVector.minimal"),
    _v(MUTANTS, "AppendsExtraField", "Required.Bytes.AbortReq.MatchesVector.minimal"),
    _v(MUTANTS, "SwapsFirstTwoFields", "Required.RoundTrip.AbortReq.Identical.msgpack.typical",
       "Required.DoubleHop.AbortReq.Stable.msgpack"),
    _v(MUTANTS, "QualifiedTag", "Required.RoundTrip.AbortReq.Identical.msgpack.typical"),
    _v(MUTANTS, "MapsInReverseOrder", "Required.Bytes.BatchStrOutput.MatchesVector.typical"),
    _testee("float32", "Required.Bytes.BatchEmbeddingOutput.MatchesVector.typical"),
    _testee("int-floats", "Required.Bytes.KvMetrics.MatchesVector.minimal"),
    _testee("drop-defaults", "Required.Bytes.AbortReq.MatchesVector.minimal"),
    _v(MUTANTS, "Float32Narrowing", "Required.Bytes.BatchEmbeddingOutput.MatchesVector.typical"),
    _v(MUTANTS, "IntegralFloatsAsInts", "Required.Bytes.KvMetrics.MatchesVector.minimal"),
    _v(MUTANTS, "EnumByName", "Required.RoundTrip.ProfileReq.Identical.msgpack.typical"),
    _v(MUTANTS, "ClampsLargeInts", "Required.Extremes.AddExternalCorpusReqOutput.RoundTrip.msgpack"),
    _v(MUTANTS, "CanonicalNaN", "Required.Extremes.FlushCacheReqInput.RoundTrip.msgpack"),
    _v(MUTANTS, "TopLevelNoneRefused", "Required.Primitive.None.TopLevel.msgpack"),
    _v(MUTANTS, "TopLevelStrDecodedAsBytes", "Required.Primitive.str.TopLevel.msgpack"),
    _v(DEFECTS, "NoTopLevelStr", "Required.Primitive.str.TopLevel.msgpack"),
    _v(MUTANTS, "CustomTypesNotInUnion", "Required.Catalogue.KvMetrics.InTopLevelUnion"),
    _v(DEFECTS, "NoLateSubclasses", "Required.Catalogue.All.LateGrandchildDecodes"),
    _v(DEFECTS, "NarrowRids", "Required.Catalogue.BatchTokenIDOutput.MatchesManifest",
       "Required.RoundTrip.BatchTokenIDOutput.Identical.msgpack.typical"),
    _v(DEFECTS, "ReorderedFields", "Required.Catalogue.FlushCacheReqInput.MatchesManifest",
       "Required.Golden.FlushCacheReqInput.DecodesVector.typical"),
    _v(DEFECTS, "UntypedDecode", "Required.RoundTrip.TokenizedGenerateReqInput.Identical.msgpack.typical"),
    # -- decoders that accept what they must refuse, or refuse what they must accept
    _v(MUTANTS, "IgnoresTrailingBytes", "Required.Refuses.AbortReq.TrailingBytes.Decode"),
    _v(MUTANTS, "DefaultsForRequiredFields", "Required.Refuses.ActiveRanksOutput.MissingRequired.status.Decode"),
    _v(MUTANTS, "WrongElementTypeKeptAsIs", "Required.Refuses.AbortReq.WrongType.abort_all.Decode"),
    _v(MUTANTS, "UnknownTagDecodesAsNone", "Required.Refuses.Message.UnknownTag.Decode"),
    _v(MUTANTS, "TensorRawLengthUnchecked", "Required.Refuses.Tensor.ShortData.Decode"),
    _v(MUTANTS, "TensorDeviceIgnored", "Required.Refuses.Tensor.UnknownDevice.Decode"),
    _v(MUTANTS, "OversizedIntsClamped", "Required.Refuses.Primitive.IntAbove64Bits.Encode"),
    _v(MUTANTS, "SurrogatesReplaced", "Required.Refuses.Primitive.LoneSurrogate.Encode"),
    _v(MUTANTS, "QuantizedSentAsIntegers",
       "Required.Refuses.BatchEmbeddingOutput.QuantizedTensor.pooled_hidden_states.Encode"),
    _v(MUTANTS, "RequiresCanonicalBytes", "Required.Accepts.AbortReq.wide_ints.Decode"),
    _v(MUTANTS, "RefusesShortArrays", "Required.Accepts.AbortReq.short.Decode"),
    _v(MUTANTS, "RefusesExtraElements", "Required.Accepts.AbortReq.extra.Decode"),
    _v(MUTANTS, "RefusesIntsForFloats", "Required.Accepts.KvMetrics.int_floats.Decode"),
    _v(MUTANTS, "UnknownExtRefused", "Required.Accepts.DumperControlReqInput.UnknownExtensionForwarded"),
    _v(MUTANTS, "DuplicateKeysFirstWins", "Required.Accepts.DumperControlReqInput.DuplicateKeyLastValue"),
    _v(MUTANTS, "BigEndianNdarraysConverted", "Required.ByteOrder.BatchStrOutput.BigEndianKept.encode"),
    _v(MUTANTS, "NdarraysDecodedNative", "Required.ByteOrder.BatchStrOutput.BigEndianKept.decode"),
    # -- extension types, tensors
    _v(MUTANTS, "RawBytesBigEndian", "Required.Tensor.float32.Exact.msgpack"),
    _v(MUTANTS, "ExtMetadataLengthLittleEndian", "Required.Tensor.float32.Exact.msgpack"),
    _v(MUTANTS, "TensorDtypeRenamed", "Required.Tensor.bfloat16.Exact.msgpack"),
    _v(DEFECTS, "UpcastsBfloat16", "Required.Tensor.bfloat16.Exact.msgpack"),
    _v(MUTANTS, "ZeroDimAsShapeOne", "Required.Tensor.zero_dim.Exact.msgpack"),
    _v(MUTANTS, "EmptyShapeFlattened", "Required.Tensor.empty.Exact.msgpack"),
    _v(MUTANTS, "ViewBytesNotContiguous", "Required.Tensor.non_contiguous.Exact.msgpack"),
    _v(DEFECTS, "KeepsRequiresGradUnderPickle", "Required.Tensor.requires_grad.Exact.pickle",
       "Required.Tensor.requires_grad.SameOnBothTransports"),
    _v(DEFECTS, "UnsafeZeroCopy", "Required.ZeroCopy.msgpack.BufferReuseSafe"),
    _v(MUTANTS, "TensorSharesReceiveBuffer", "Required.TensorMemory.msgpack.OwnsMemory"),
    # -- PickleWrapper, receive paths, security, trace
    _v(MUTANTS, "GuessesWrappersFromValues", "Required.RoundTrip.TokenizedGenerateReqInput.Identical.msgpack.typical"),
    _v(MUTANTS, "WrapperContentsLost", "Required.Unwrap.TokenizedGenerateReqInput.NoWrapperLeft.msgpack",
       "Required.Bytes.TokenizedGenerateReqInput.MatchesVector.typical"),
    _v(DEFECTS, "ForgetsUnwrap", "Required.Unwrap.TokenizedGenerateReqInput.NoWrapperLeft.msgpack"),
    _v(ENGINE, "ControllerSkipsUnwrap", "Required.ReceivePath.TokenizedGenerateReqInput.Controller.msgpack"),
    _v(ENGINE, "SchedulerSkipsUnwrap", "Required.ReceivePath.TokenizedGenerateReqInput.Scheduler.msgpack"),
    _v(ENGINE, "DetokenizerSkipsUnwrap", "Required.ReceivePath.BatchTokenIDOutput.Detokenizer.msgpack"),
    _v(ENGINE, "ControllerDropsUnroutable", "Required.ReceivePath.TokenizedGenerateReqInput.Unroutable.msgpack"),
    _v(DEFECTS, "UnpicklesWireBytes", "Required.Security.top_level.NoPickleFromUntrustedPeer",
       "Required.Security.field.NoPickleFromUntrustedPeer"),
    _v(MUTANTS, "UntrustedReceiveUnpickles", "Required.Security.field.NoPickleFromUntrustedPeer"),
    _v(MUTANTS, "UntrustedReceiveUnpicklesAllowListed", "Required.Security.top_level.WrapperStaysClosed",
       "Required.Security.field.WrapperStaysClosed"),
    _v(DEFECTS, "DropsTraceUnderMsgpack", "Required.Trace.TokenizedGenerateReqInput.ContextSurvivesForwarding.msgpack"),
    _v(DEFECTS, "NoBase64", "Required.HttpBase64.UpdateWeightsFromTensorReqInput.Decodes",
       "Required.HttpBase64.UpdateWeightsFromTensorReqInput.RejectsMalformed"),
    _v(DEFECTS, "NarrowLogprobs", "Required.Logprobs.BatchTokenIDOutput.NestedNone.prompt.msgpack"),
    _v(MUTANTS, "DropsNoneInLists", "Required.Logprobs.BatchTokenIDOutput.NestedNone.prompt.msgpack"),
    # -- transports
    _v(MUTANTS, "PickleNormalizesLikeMsgpack", "Required.RoundTrip.BlockReqInput.Identical.pickle.typical"),
    _v(MUTANTS, "SplitsMessageIntoFrames", "Required.Socket.AbortReq.ArrivesWhole.msgpack"),
    # -- the spec's finer rules
    _v(SPEC_RULES, "OmitsEqualDefaults", "Required.Omission.BeamSearchSequence.NegativeZeroWritten"),
    Violation("WideningCanonicalizesNaN", f"{SPEC_RULES}:CanonicalNaN",
              ("Required.FloatWidening.signalling_nan.KeepsBits",
               "Required.FloatWidening.negative_nan_payload.KeepsBits")),
)}

ROUNDTRIP = "Required.RoundTrip.*"
BYTES = "Required.Bytes.*.MatchesVector.*"
REFUSES = "Required.Refuses.*"
ACCEPTS = "Required.Accepts.*"
TENSOR = "Required.Tensor.*"
RECEIVE = ("Required.ReceivePath.*.Controller.*", "Required.ReceivePath.*.Scheduler.*")

REQUIREMENTS: dict[str, Entry] = {
    "R-MSG-1": Entry((BYTES, ROUNDTRIP), ("SwapsFirstTwoFields", "QualifiedTag")),
    "R-MSG-2": Entry((BYTES,), ("DropsTrailingDefaults", "AppendsExtraField", "testee --break drop-defaults")),
    "R-MSG-4": Entry((BYTES, ROUNDTRIP, "Required.DoubleHop.*", "Required.Omission.*"),
                     ("MapsInReverseOrder", "OmitsEqualDefaults")),
    "R-MSG-5": Entry((REFUSES, ACCEPTS), ("DefaultsForRequiredFields", "WrongElementTypeKeptAsIs",
                                         "UnknownTagDecodesAsNone", "RefusesShortArrays", "RefusesExtraElements")),
    "R-MSG-6": Entry(("Required.Primitive.*.TopLevel.*",), ("NoTopLevelStr", "TopLevelNoneRefused",
                                                            "TopLevelStrDecodedAsBytes")),
    "R-MSG-7": Entry(("Required.Catalogue.*.InTopLevelUnion", "Required.Catalogue.All.NoUnlistedMessages"),
                     ("CustomTypesNotInUnion",)),
    "R-MSG-8": Entry(("Required.Catalogue.All.LateGrandchildDecodes",), ("NoLateSubclasses",)),
    "R-MSG-9": Entry(("Required.DoubleHop.*.Stable.*",), ("SwapsFirstTwoFields",)),
    "R-MSG-10": Entry(("Required.Catalogue.*.MatchesManifest", ROUNDTRIP, "Required.Logprobs.*"),
                      ("NarrowRids", "NarrowLogprobs")),
    "R-MSG-11": Entry((REFUSES,), ("IgnoresTrailingBytes", "DefaultsForRequiredFields", "UnknownTagDecodesAsNone",
                                   "TensorRawLengthUnchecked")),
    "R-VAL-1": Entry((REFUSES, "Required.Extremes.*"), ("OversizedIntsClamped", "ClampsLargeInts")),
    "R-VAL-2": Entry((BYTES, ACCEPTS, "Required.Extremes.*"), ("Float32Narrowing", "IntegralFloatsAsInts",
                                                         "RefusesIntsForFloats", "CanonicalNaN")),
    "R-VAL-3": Entry((REFUSES,), ("SurrogatesReplaced",)),
    "R-VAL-4": Entry((ROUNDTRIP,), ("EnumByName", "UntypedDecode")),
    "R-VAL-5": Entry(("Required.FloatWidening.*",), ("WideningCanonicalizesNaN",)),
    "R-VAL-6": Entry(("Required.Accepts.*.DuplicateKeyLastValue",), ("DuplicateKeysFirstWins",)),
    "R-EXT-6": Entry(("Required.ByteOrder.*.BigEndianKept.*",),
                     ("BigEndianNdarraysConverted", "NdarraysDecodedNative")),
    "R-EXT-1": Entry((TENSOR, ROUNDTRIP, BYTES), ("ExtMetadataLengthLittleEndian",)),
    "R-EXT-2": Entry((TENSOR, ROUNDTRIP, BYTES), ("RawBytesBigEndian",)),
    "R-EXT-3": Entry((REFUSES,), ("TensorRawLengthUnchecked",)),
    "R-EXT-4": Entry(("Required.Accepts.*.UnknownExtensionForwarded",), ("UnknownExtRefused",)),
    "R-TEN-1": Entry(("Required.Tensor.*.Exact.*", "Required.TensorDtype.*", REFUSES),
                     ("UpcastsBfloat16", "TensorDtypeRenamed", "QuantizedSentAsIntegers")),
    "R-TEN-2": Entry(("Required.Tensor.zero_dim.*", "Required.Tensor.empty.*"), ("ZeroDimAsShapeOne",
                                                                                "EmptyShapeFlattened")),
    "R-TEN-3": Entry(("Required.Tensor.cuda.*", REFUSES), ("TensorDeviceIgnored",)),
    "R-TEN-4": Entry((TENSOR,), ("ViewBytesNotContiguous", "KeepsRequiresGradUnderPickle")),
    "R-TEN-5": Entry(("Required.ZeroCopy.*.BufferReuseSafe", "Required.TensorMemory.*"),
                     ("UnsafeZeroCopy", "TensorSharesReceiveBuffer")),
    "R-PW-1": Entry(("Required.Unwrap.*", "Required.Trace.*"), ("WrapperContentsLost",)),
    "R-PW-2": Entry((ROUNDTRIP,), ("GuessesWrappersFromValues",)),
    "R-PW-3": Entry(("Required.Unwrap.*.NoWrapperLeft.*", "Required.ReceivePath.*",
                     "Required.E2E.*.NoWrapperPastReceive"),
                    ("ForgetsUnwrap", "ControllerSkipsUnwrap", "SchedulerSkipsUnwrap", "DetokenizerSkipsUnwrap")),
    "R-PW-5": Entry(("Required.Security.*",), ("UnpicklesWireBytes", "UntrustedReceiveUnpickles",
                                               "UntrustedReceiveUnpicklesAllowListed")),
    "R-SEC-1": Entry(("Required.Security.*.NoPickleFromUntrustedPeer",), ("UnpicklesWireBytes",)),
    "R-PW-6": Entry(("Required.Unwrap.*", BYTES), ("WrapperContentsLost",)),
    "R-HTTP-1": Entry(("Required.HttpBase64.*.Decodes",), ("NoBase64",)),
    "R-HTTP-2": Entry(("Required.HttpBase64.*.RejectsMalformed",), ("NoBase64",)),
    "R-NONE-1": Entry(("Required.Logprobs.*.NestedNone.*",), ("NarrowLogprobs", "DropsNoneInLists")),
    "R-TRACE-1": Entry(("Required.Trace.*", "Required.E2E.*.OneLinkedTrace.*"), ("DropsTraceUnderMsgpack",)),
    "R-TRACE-2": Entry(("Required.Trace.*.ContextSurvivesForwarding.*",), ("DropsTraceUnderMsgpack",)),
    "R-TRACE-3": Entry(("Required.Trace.*.ContextSurvivesForwarding.*",), ("DropsTraceUnderMsgpack",)),
    "R-NORM-1": Entry(("Required.CrossTransport.*", "Required.Tensor.*.SameOnBothTransports"),
                      ("KeepsRequiresGradUnderPickle",)),
    "R-NORM-2": Entry((ROUNDTRIP, "Required.CrossTransport.*"), ("PickleNormalizesLikeMsgpack",)),
    "R-TRN-2": Entry(("Required.Socket.*.ArrivesWhole.*",), ("SplitsMessageIntoFrames",)),
    "R-TRN-3": Entry(("Required.ZeroCopy.*.BufferReuseSafe",), ("UnsafeZeroCopy",)),
    "R-SEC-2": Entry((REFUSES,), ("WrongElementTypeKeptAsIs", "TensorRawLengthUnchecked")),
    "R-DP-1": Entry(RECEIVE, ("ControllerSkipsUnwrap", "SchedulerSkipsUnwrap")),
    "R-DP-2": Entry(("Required.ReceivePath.*.Controller.*",), ("ControllerSkipsUnwrap",)),
    "R-DP-3": Entry(RECEIVE, ("ControllerSkipsUnwrap", "SchedulerSkipsUnwrap")),
    "R-DP-5": Entry(("Required.ReceivePath.*.Unroutable.*",), ("ControllerDropsUnroutable",)),
    "R-DP-4": Entry(("Required.Trace.*", "Required.E2E.*.OneLinkedTrace.*"), ("DropsTraceUnderMsgpack",)),
    "R-VEC-1": Entry(("Required.Golden.*.DecodesVector.*",), ("ReorderedFields",)),
    "R-VEC-2": Entry((ACCEPTS,), ("RequiresCanonicalBytes",)),
    "R-VEC-3": Entry((BYTES,), ("Float32Narrowing", "IntegralFloatsAsInts", "DropsTrailingDefaults",
                                "testee --break float32", "testee --break int-floats", "testee --break drop-defaults")),
    "R-VER-1": Entry(("Required.Catalogue.*.MatchesManifest", "Required.Catalogue.All.NoUnlistedMessages"),
                     ("NarrowRids", "ReorderedFields")),
}

#: MUSTs that are not a property of one implementation's wire behaviour, so no suite check
#: can fail them; the table shows the reason instead of a proof.
EXEMPT: dict[str, str] = {
    "R-TRN-1": "a deployment rule (both ends of a link use one transport); every check runs both ends with "
               "the same transport, under each",
    "R-DP-6": "a deployment rule (the controller at least as new as the tokenizer manager)",
    "R-VER-4": "a rule for releases of a manifest (regenerate vectors and structs), enforced by this "
               "project's tests (tests/test_golden.py, tests/test_reference_structs.py)",
}
