"""Which Required checks test each clause of each MUST, and which planted violations prove them.

Every MUST sentence of spec/SPEC.md is split into its clauses (``CLAUSES``: ids R-MSG-4a,
R-MSG-4b, ...). Each clause names its Required checks (check-id globs) and a planted violation
on both paths: **in-process** (a mutant of reference_tools/proof/mutants.py, a defective adapter
of tests/, an engine whose receive path skips its unwrap) and **testee** (the same kind of bug
in a testee process, seen by the runner only through the protocol: a ``--break`` mode of
reference_impl/testee.py, or a mutant behind the protocol, reference_tools/proof/mutant_testee.py).
A clause that cannot apply to one path says why (``NO_TESTEE_PATH``, few and reasoned); a clause
whose check or violations are being written elsewhere is ``pending`` with what is missing.

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
class Clause:
    """One clause of a MUST: what it says, its checks, and its planted violations per path."""

    id: str                        # the requirement id and a letter: R-MSG-4a
    text: str                      # the clause, in the spec's words (shortened)
    checks: tuple[str, ...]        # fnmatch patterns over Required check ids
    in_process: tuple[str, ...]    # keys of VIOLATIONS whose impl is an adapter (module:Class)
    testee: tuple[str, ...] = ()   # keys of VIOLATIONS whose impl is a testee (cmd:...)
    no_testee: str = ""            # a key of NO_TESTEE_PATH: why this clause has no testee path
    pending: str = ""              # what is being added elsewhere (checks, mutant, break mode)

    @property
    def requirement(self) -> str:
        return self.id.rstrip("abcdefghij")


def _v(module: str, name: str, *must_fail: str, transport: str = "both", e2e: bool = False) -> Violation:
    return Violation(name, f"{module}:{name}", tuple(must_fail), transport, e2e)


def _testee(mode: str, *must_fail: str) -> Violation:
    """The reference testee (spec/testee.md) with a planted bug, over its subprocess protocol."""
    return Violation(f"testee --break {mode}", f"cmd:{sys.executable} -m reference_impl.testee --break {mode}",
                     tuple(must_fail), "msgpack")


def _behind_testee(name: str, impl: str, *must_fail: str) -> Violation:
    """An in-process violation's adapter behind the testee protocol (reference_tools/proof/mutant_testee.py):
    the same bug in a testee process."""
    return Violation(f"testee mutant {name}", f"cmd:{sys.executable} -m reference_tools.proof.mutant_testee {impl}",
                     tuple(must_fail), "msgpack")


def is_testee(violation: Violation) -> bool:
    return violation.impl.startswith("cmd:")


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
    _v(MUTANTS, "TensorDeviceIgnored", "Required.Refuses.Tensor.UnknownDevice.Decode",
       "Required.Tensor.cuda_0.DeviceKept"),
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
    _v(MUTANTS, "CollidingKeysWritten", "Required.Accepts.DumperControlReqInput.CollidingKeysNotWritten"),
    _v(MUTANTS, "BigEndianNdarraysConverted", "Required.ByteOrder.BatchStrOutput.BigEndianKept.encode"),
    _v(MUTANTS, "NdarraysDecodedNative", "Required.ByteOrder.BatchStrOutput.BigEndianKept.decode"),
    # -- extension types, tensors
    _v(MUTANTS, "RawBytesBigEndian", "Required.Tensor.float32.Exact.msgpack"),
    _v(MUTANTS, "ExtMetadataLengthLittleEndian", "Required.Tensor.float32.Exact.msgpack"),
    _v(MUTANTS, "TensorDtypeRenamed", "Required.Tensor.bfloat16.Exact.msgpack"),
    _v(DEFECTS, "UpcastsBfloat16", "Required.Tensor.bfloat16.Exact.msgpack"),
    _v(MUTANTS, "ZeroDimAsShapeOne", "Required.Tensor.zero_dim.Exact.msgpack",
       "Required.EveryEdge.BatchStrOutput.ZeroDim.msgpack"),
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
    # -- decoders that check less than R-EXT-3 and R-TEN-1 ask
    _v(MUTANTS, "NdarrayDtypeChecksSkipped", "Required.Refuses.NDArray.ObjectDtype.Decode",
       "Required.Refuses.NDArray.StructuredDtype.Decode", "Required.Refuses.NDArray.NotCodePoint.Decode"),
    _v(MUTANTS, "LargeShapesDecodedEmpty", "Required.Refuses.Tensor.TooManyDims.Decode",
       "Required.Refuses.Tensor.HugeEmptyShape.Decode"),
    _v(MUTANTS, "KnowsOnlyCommonDtypes", "Required.TensorDtype.complex64.Travels",
       "Required.TensorDtype.uint16.Travels"),
    _v(MUTANTS, "UnknownDtypesAsBytes", "Required.Refuses.Tensor.UnknownDtype.Decode"),
    _v(MUTANTS, "QuantizedDtypesDecoded", "Required.Refuses.Tensor.QuantizedDtype.Decode"),
    _v(MUTANTS, "UnwrapSkipped", "Required.Unwrap.TokenizedGenerateReqInput.NoWrapperLeft.msgpack"),
    _v(MUTANTS, "ArrayTypecodeUnsigned", "Required.Bytes.BatchTokenIDOutput.MatchesVector.typical"),
    _v(MUTANTS, "NoneInListsAsZero", "Required.Logprobs.BatchTokenIDOutput.NestedNone.prompt.msgpack"),
    _v(MUTANTS, "IgnoresStorageOffset", "Required.Tensor.sliced_view.Exact.msgpack"),
    # -- testee-side violations of the clauses: break modes of the reference testee
    _testee("accept-all", "Required.Refuses.Message.UnknownTag.Decode",
            "Required.Refuses.AbortReq.WrongType.abort_all.Decode",
            "Required.Refuses.ActiveRanksOutput.MissingRequired.status.Decode"),
    _testee("drop-field", "Required.Golden.FlushCacheReqInput.DecodesVector.typical"),
    _testee("no-unwrap", "Required.Unwrap.TokenizedGenerateReqInput.NoWrapperLeft.msgpack"),
    _testee("unsafe-receive", "Required.Security.field.NoPickleFromUntrustedPeer"),
    _testee("forget-define", "Required.Catalogue.All.LateGrandchildDecodes"),
    # -- edge values at every position (EveryEdge) and the encoder input domain (SPEC 3.1)
    _v(MUTANTS, "NonFiniteInListsAsNil", "Required.EveryEdge.BatchTokenIDOutput.NonFinite.msgpack"),
    _v(MUTANTS, "FalsyOpaqueValuesSentAsNone", "Required.EveryEdge.BatchStrOutput.PickleWrapperFalsy.msgpack"),
    _v(MUTANTS, "NumpyBoolEncodedAsInt", "Required.EveryEdge.AbortReq.NumpyScalar.msgpack"),
    _v(MUTANTS, "NumpyFloatsRoundedToShortest", "Required.EveryEdge.FlushCacheReqInput.NumpyScalar.msgpack"),
    _testee("nonfinite-nil", "Required.EveryEdge.BatchStrOutput.NonFinite.msgpack"),
    _testee("falsy-wrap-nil", "Required.EveryEdge.BatchTokenIDOutput.PickleWrapperFalsy.msgpack"),
    # -- map-encoded structs, fixed-size tuples, device strings, the HTTP bridge
    _v(MUTANTS, "MapDefaultsNotFilled", "Required.Accepts.KvHintAction.MapDefaultsFilled"),
    _v(MUTANTS, "MapUnknownKeysRefused", "Required.Accepts.BeamSearchSequence.MapUnknownKey"),
    _v(MUTANTS, "TupleAnyLength", "Required.Refuses.TokenizedEmbeddingReqInput.TupleTooShort.mm_inputs.Decode",
       "Required.Refuses.TokenizedEmbeddingReqInput.TupleTooLong.mm_inputs.Decode"),
    _v(MUTANTS, "HttpUnknownKeysAccepted", "Required.Http.AbortReq.RejectsUnknownKey"),
    _v(MUTANTS, "HttpFactoryRequired", "Required.Http.ParseFunctionCallReq.OmittedFieldsTakeDefaults"),
    _testee("no-map-defaults", "Required.Accepts.KvHintAction.MapDefaultsFilled"),
    _testee("refuse-unknown-map-keys", "Required.Accepts.BeamSearchSequence.MapUnknownKey"),
    _testee("tuple-any-length", "Required.Refuses.TokenizedEmbeddingReqInput.TupleTooShort.mm_inputs.Decode"),
    _testee("device-to-cpu", "Required.Tensor.cuda_0.DeviceKept"),
    Violation("testee --tensors values --break device-to-cpu",
              f"cmd:{sys.executable} -m reference_impl.testee --tensors values --break device-to-cpu",
              ("Required.Tensor.cuda_0.DeviceKept", "Required.Tensor.xpu_1.DeviceKept"), "msgpack"),
    _testee("http-unknown-keys", "Required.Http.AbortReq.RejectsUnknownKey"),
    _testee("http-factory-required", "Required.Http.ParseFunctionCallReq.OmittedFieldsTakeDefaults"),
    # -- receive paths with batches, the implementation's own payloads, received arrays' memory
    _v(MUTANTS, "SchedulerUnwrapsFirstSubRequestOnly",
       "Required.ReceivePath.BatchTokenizedGenerateReqInput.Scheduler.msgpack"),
    _v(MUTANTS, "TopLevelWrapperKeptClosed", "Required.Payload.PickleWrapper.StateKept.msgpack"),
    _v(MUTANTS, "TimeStatsDropsAField", "Required.Payload.TokenizedGenerateReqInput.time_stats.StateKept.msgpack"),
    _v(MUTANTS, "NdarraysShareReceiveBuffer", "Required.TensorMemory.ndarray.OwnsMemory.msgpack"),
    _testee("colliding-keys", "Required.Accepts.DumperControlReqInput.CollidingKeysNotWritten"),
)}

#: In-process violations that also run behind the testee protocol, with the checks the testee
#: form must fail (msgpack: the testee path's transport).
BEHIND_TESTEE: dict[str, tuple[str, ...]] = {
    # the testee's decode re-encodes through the same encoder, so a symmetric encoder bug (fields
    # swapped twice, bytes reversed twice) shows in the byte checks, not in a round trip
    "SwapsFirstTwoFields": ("Required.Bytes.AbortReq.MatchesVector.typical",),
    "QualifiedTag": ("Required.RoundTrip.AbortReq.Identical.msgpack.typical",
                     "Required.DoubleHop.AbortReq.Stable.msgpack"),
    "AppendsExtraField": ("Required.Bytes.AbortReq.MatchesVector.minimal",),
    "MapsInReverseOrder": ("Required.Bytes.BatchStrOutput.MatchesVector.typical",),
    "EnumByName": ("Required.RoundTrip.ProfileReq.Identical.msgpack.typical",),
    "ClampsLargeInts": ("Required.Extremes.AddExternalCorpusReqOutput.RoundTrip.msgpack",),
    "CanonicalNaN": ("Required.Extremes.FlushCacheReqInput.RoundTrip.msgpack",),
    "TopLevelNoneRefused": ("Required.Primitive.None.TopLevel.msgpack",),
    "TopLevelStrDecodedAsBytes": ("Required.Primitive.str.TopLevel.msgpack",),
    "IgnoresTrailingBytes": ("Required.Refuses.AbortReq.TrailingBytes.Decode",),
    "TensorRawLengthUnchecked": ("Required.Refuses.Tensor.ShortData.Decode",),
    "TensorDeviceIgnored": ("Required.Refuses.Tensor.UnknownDevice.Decode",),
    "OversizedIntsClamped": ("Required.Refuses.Primitive.IntAbove64Bits.Encode",),
    "SurrogatesReplaced": ("Required.Refuses.Primitive.LoneSurrogate.Encode",),
    "QuantizedSentAsIntegers": ("Required.Refuses.BatchEmbeddingOutput.QuantizedTensor.pooled_hidden_states.Encode",),
    "RequiresCanonicalBytes": ("Required.Accepts.AbortReq.wide_ints.Decode",),
    "RefusesShortArrays": ("Required.Accepts.AbortReq.short.Decode",),
    "RefusesExtraElements": ("Required.Accepts.AbortReq.extra.Decode",),
    "RefusesIntsForFloats": ("Required.Accepts.KvMetrics.int_floats.Decode",),
    "UnknownExtRefused": ("Required.Accepts.DumperControlReqInput.UnknownExtensionForwarded",),
    "DuplicateKeysFirstWins": ("Required.Accepts.DumperControlReqInput.DuplicateKeyLastValue",),
    "BigEndianNdarraysConverted": ("Required.ByteOrder.BatchStrOutput.BigEndianKept.encode",),
    "NdarraysDecodedNative": ("Required.ByteOrder.BatchStrOutput.BigEndianKept.decode",),
    "RawBytesBigEndian": ("Required.TensorDtype.float32.Travels",),
    "ExtMetadataLengthLittleEndian": ("Required.Tensor.float32.Exact.msgpack",),
    "TensorDtypeRenamed": ("Required.Tensor.bfloat16.Exact.msgpack",),
    "ZeroDimAsShapeOne": ("Required.Tensor.zero_dim.Exact.msgpack",),
    "EmptyShapeFlattened": ("Required.Tensor.empty.Exact.msgpack",),
    "ArrayTypecodeUnsigned": ("Required.Bytes.BatchTokenIDOutput.MatchesVector.typical",),
    "GuessesWrappersFromValues": ("Required.RoundTrip.TokenizedGenerateReqInput.Identical.msgpack.typical",),
    "WrapperContentsLost": ("Required.Unwrap.TokenizedGenerateReqInput.NoWrapperLeft.msgpack",
                            "Required.Trace.TokenizedGenerateReqInput.ContextSurvivesForwarding.msgpack"),
    "DropsNoneInLists": ("Required.Logprobs.BatchTokenIDOutput.NestedNone.prompt.msgpack",),
    "NdarrayDtypeChecksSkipped": ("Required.Refuses.NDArray.ObjectDtype.Decode",
                                  "Required.Refuses.NDArray.StructuredDtype.Decode",
                                  "Required.Refuses.NDArray.NotCodePoint.Decode"),
    "LargeShapesDecodedEmpty": ("Required.Refuses.Tensor.TooManyDims.Decode",
                                "Required.Refuses.Tensor.HugeEmptyShape.Decode"),
    "KnowsOnlyCommonDtypes": ("Required.TensorDtype.complex64.Travels", "Required.TensorDtype.uint16.Travels"),
    "UnknownDtypesAsBytes": ("Required.Refuses.Tensor.UnknownDtype.Decode",),
    "QuantizedDtypesDecoded": ("Required.Refuses.Tensor.QuantizedDtype.Decode",),
    "NoBase64": ("Required.HttpBase64.UpdateWeightsFromTensorReqInput.Decodes",
                 "Required.HttpBase64.UpdateWeightsFromTensorReqInput.RejectsMalformed"),
    "OmitsEqualDefaults": ("Required.Omission.BeamSearchSequence.NegativeZeroWritten",),
    "WideningCanonicalizesNaN": ("Required.FloatWidening.signalling_nan.KeepsBits",
                                 "Required.FloatWidening.negative_nan_payload.KeepsBits"),
}
for _name, _must_fail in BEHIND_TESTEE.items():
    _testee_form = _behind_testee(_name, VIOLATIONS[_name].impl.replace(f"{MUTANTS}:", ""), *_must_fail)
    VIOLATIONS[_testee_form.name] = _testee_form
# pickle against msgpack needs both transports behind the testee too
VIOLATIONS["testee mutant PickleNormalizesLikeMsgpack"] = Violation(
    "testee mutant PickleNormalizesLikeMsgpack",
    f"cmd:{sys.executable} -m reference_tools.proof.mutant_testee PickleNormalizesLikeMsgpack",
    ("Required.RoundTrip.BlockReqInput.Identical.pickle.typical",
     "Required.CrossTransport.BlockReqInput.SameValue.typical"),
    "both")

ROUNDTRIP = "Required.RoundTrip.*"
BYTES = "Required.Bytes.*.MatchesVector.*"
REFUSES = "Required.Refuses.*"
ACCEPTS = "Required.Accepts.*"
TENSOR = "Required.Tensor.*"
RECEIVE = ("Required.ReceivePath.*.Controller.*", "Required.ReceivePath.*.Scheduler.*")


def _t(name: str) -> str:
    """The testee form of an in-process violation (BEHIND_TESTEE)."""
    return f"testee mutant {name}"


#: Why a clause has no testee path. Each reason is a property of the testee protocol itself.
NO_TESTEE_PATH: dict[str, str] = {
    "engine": "the testee protocol drives a codec, not an engine: it has no controller, scheduler, detokenizer or "
              "tokenizer-manager receive path (spec/testee.md ops), so the ReceivePath and E2E checks need an "
              "in-process adapter's receive_path.* or e2e capability",
    "catalogue": "a testee is checked against the manifest it claims: the runner builds its catalogue and union from "
                 "that manifest (spec/testee.md 2.1), so the catalogue holds by construction and its wire behaviour "
                 "is judged by the other clauses",
    "process": "a testee is another process: what it answers is bytes the runner decodes and sends itself, so memory "
               "it shares, zero-copy sends and socket frames are the runner's, never the testee's",
    "numpy": "numpy scalars are values of a Python encoder's input domain (SPEC 3.1); a testee is sent JSON views, "
             "which carry only the value a numpy scalar stands for, so its encoder never holds one",
    "payload": "an implementation's own opaque objects live in its process and are pickled there; a testee carries "
               "wrappers as opaque bytes (R-PW-6) and has no objects of its own for the runner to compare",
    "view": "a JSON view (SPEC 13.3) carries a tensor's value only: no strides, storage offset or requires_grad "
            "reach a testee, so it never holds the non-contiguous or grad-requiring tensor the clause is about",
}

C = Clause
CLAUSES: tuple[Clause, ...] = (
    C("R-MSG-1a", "a tagged array_like struct is a msgpack array whose first element is the tag, a str equal to the "
      "manifest's tag", (BYTES, ROUNDTRIP), ("QualifiedTag",), (_t("QualifiedTag"),)),
    C("R-MSG-1b", "one element per field follows the tag, in the manifest's field order", (ROUNDTRIP, BYTES),
      ("SwapsFirstTwoFields",), (_t("SwapsFirstTwoFields"),)),
    C("R-MSG-2a", "every field is encoded, including fields equal to their default (no element dropped)", (BYTES,),
      ("DropsTrailingDefaults",), ("testee --break drop-defaults",)),
    C("R-MSG-2b", "an encoder MUST NOT insert elements", (BYTES,), ("AppendsExtraField",), (_t("AppendsExtraField"),)),
    C("R-MSG-2c", "an encoder MUST NOT reorder elements", (ROUNDTRIP, "Required.DoubleHop.*", BYTES),
      ("SwapsFirstTwoFields",),
      (_t("SwapsFirstTwoFields"),)),
    C("R-MSG-4a", "an array_like: false struct is a map from field name to value, in field order", (BYTES, ROUNDTRIP),
      ("MapsInReverseOrder",), (_t("MapsInReverseOrder"),)),
    C("R-MSG-4b", "under omit_defaults an encoder MUST write every field not identical to its default (same type and, "
      "for floats, the same bits: -0.0 is written)", ("Required.Omission.*",), ("OmitsEqualDefaults",),
      (_t("OmitsEqualDefaults"),)),
    C("R-MSG-4c", "a decoder MUST fill in the default of every absent field", ("Required.Accepts.*.MapDefaultsFilled",),
      ("MapDefaultsNotFilled",), ("testee --break no-map-defaults",)),
    C("R-MSG-4d", "a decoder MUST ignore map keys it does not know unless the struct has forbid_unknown_fields",
      ("Required.Accepts.*.MapUnknownKey",), ("MapUnknownKeysRefused",), ("testee --break refuse-unknown-map-keys",)),
    C("R-MSG-5a", "a decoder MUST accept an array shorter than the field count when the missing trailing fields have "
      "defaults", (ACCEPTS,), ("RefusesShortArrays",), (_t("RefusesShortArrays"),)),
    C("R-MSG-5b", "a decoder MUST ignore elements beyond the last field it "
                  "knows", (ACCEPTS,), ("RefusesExtraElements",),
      (_t("RefusesExtraElements"),)),
    C("R-MSG-5c", "a missing field without a default, an element of the wrong type or a tag not in the union MUST fail "
      "the decode", (REFUSES,), ("DefaultsForRequiredFields", "WrongElementTypeKeptAsIs", "UnknownTagDecodesAsNone"),
      ("testee --break accept-all",)),
    C("R-MSG-6a", "an encoder MUST accept every member of the union and its primitives (and nil) as a whole message",
      ("Required.Primitive.*.TopLevel.*",), ("TopLevelNoneRefused",), (_t("TopLevelNoneRefused"),)),
    C("R-MSG-6b", "a top-level str is a plain msgpack str, and a decoder that sees a str marker first MUST "
                  "decode a str",
      ("Required.Primitive.*.TopLevel.*",), ("NoTopLevelStr", "TopLevelStrDecodedAsBytes"),
      (_t("TopLevelStrDecodedAsBytes"),)),
    C("R-MSG-7a", "the union MUST contain every message of the manifest, subclasses at any depth and registered types",
      ("Required.Catalogue.*.InTopLevelUnion", "Required.Catalogue.All.NoUnlistedMessages"),
      ("CustomTypesNotInUnion",), no_testee="catalogue"),
    C("R-MSG-8a", "an implementation that discovers message types at run time MUST accept subclasses defined after "
      "start-up", ("Required.Catalogue.All.LateGrandchildDecodes",), ("NoLateSubclasses",),
      ("testee --break forget-define",)),
    C("R-MSG-9a", "decoding and encoding again MUST give a value identical to the first decode",
      ("Required.DoubleHop.*.Stable.*",), ("SwapsFirstTwoFields",), (_t("QualifiedTag"),)),
    C("R-MSG-10a", "an implementation MUST NOT narrow or widen field types",
      ("Required.Catalogue.*.MatchesManifest", ROUNDTRIP, "Required.Logprobs.*"), ("NarrowRids", "NarrowLogprobs"),
      no_testee="catalogue"),
    C("R-MSG-11a", "a decoder MUST reject input that does not match the manifest's types: unknown tag, wrong element "
      "type, missing required field", (REFUSES,), ("DefaultsForRequiredFields", "UnknownTagDecodesAsNone",
                                                  "WrongElementTypeKeptAsIs"), ("testee --break accept-all",)),
    C("R-MSG-11b", "a decoder MUST reject bytes that are not one msgpack object: malformed msgpack, trailing bytes",
      (REFUSES,), ("IgnoresTrailingBytes",), (_t("IgnoresTrailingBytes"),)),
    C("R-MSG-11c", "a decoder MUST reject extension payloads that contradict their metadata", (REFUSES,),
      ("TensorRawLengthUnchecked",), (_t("TensorRawLengthUnchecked"),)),
    C("R-MSG-11d", "a decoder MUST reject a fixed-size tuple of the wrong length (a wrong element count)",
      ("Required.Refuses.*.TupleTooShort.*", "Required.Refuses.*.TupleTooLong.*"), ("TupleAnyLength",),
      ("testee --break tuple-any-length",)),
    C("R-VAL-1a", "ints travel in the signed 64-bit range and unsigned up to 2^64-1", ("Required.Extremes.*",),
      ("ClampsLargeInts",), (_t("ClampsLargeInts"),)),
    C("R-VAL-1b", "an int beyond that range MUST fail to encode", (REFUSES,), ("OversizedIntsClamped",),
      (_t("OversizedIntsClamped"),)),
    C("R-VAL-2a", "encoders MUST write floats as float 64, never float 32 or an int", (BYTES,),
      ("Float32Narrowing", "IntegralFloatsAsInts"), ("testee --break float32", "testee --break int-floats")),
    C("R-VAL-2b", "decoders MUST accept float 32 and integers for a float field", (ACCEPTS,),
      ("RefusesIntsForFloats", "RequiresCanonicalBytes"), (_t("RefusesIntsForFloats"), _t("RequiresCanonicalBytes"))),
    C("R-VAL-2c", "the bit pattern of every float64 is kept (NaN payloads, -0.0)", ("Required.Extremes.*",),
      ("CanonicalNaN",), (_t("CanonicalNaN"),)),
    C("R-VAL-2d", "non-finite floats (-inf, NaN) inside nested lists keep their values, never null",
      ("Required.EveryEdge.*.NonFinite.*",), ("NonFiniteInListsAsNil",), ("testee --break nonfinite-nil",)),
    C("R-VAL-3a", "a str that is not valid Unicode (lone surrogates) MUST fail to encode", (REFUSES,),
      ("SurrogatesReplaced",), (_t("SurrogatesReplaced"),)),
    C("R-VAL-4a", "an enum travels as its member's value, never its "
                  "name", (ROUNDTRIP,), ("EnumByName", "UntypedDecode"),
      (_t("EnumByName"),)),
    C("R-VAL-5a", "a float 32 read into a float position MUST widen as IEEE 754 convertFormat (NaN sign and payload "
      "kept)", ("Required.FloatWidening.*",), ("WideningCanonicalizesNaN",), (_t("WideningCanonicalizesNaN"),)),
    C("R-VAL-6a", "an encoder MUST NOT write two keys equal (or colliding) as values of the map's key type",
      ("Required.Accepts.*.CollidingKeysNotWritten",), ("CollidingKeysWritten",), ("testee --break colliding-keys",)),
    C("R-VAL-7a", "a bool or np.bool_ is written true/false, never 0/1, and an int is never written true/false",
      ("Required.EveryEdge.*.NumpyScalar.*",), ("NumpyBoolEncodedAsInt",), no_testee="numpy"),
    C("R-VAL-8a", "an np.integer is written as the int of its value and an np.floating as the float 64 of its value",
      ("Required.EveryEdge.*.NumpyScalar.*", "Required.EveryEdge.*.Float32Origin.*"),
      ("NumpyFloatsRoundedToShortest",), no_testee="numpy"),
    C("R-VAL-9a", "a 0-d array is an array (an extension with shape []), never a scalar",
      ("Required.EveryEdge.*.ZeroDim.*", "Required.Tensor.zero_dim.*"), ("ZeroDimAsShapeOne",),
      (_t("ZeroDimAsShapeOne"),)),
    C("R-VAL-6b", "a decoder that meets duplicate keys MUST refuse or keep one entry: the first key's position, "
                  "the last "
      "value", ("Required.Accepts.*.DuplicateKeyLastValue",), ("DuplicateKeysFirstWins",),
      (_t("DuplicateKeysFirstWins"),)),
    C("R-EXT-1a", "a buffer extension is a 4-byte big-endian metadata length, the msgpack metadata, then the raw bytes",
      (TENSOR, ROUNDTRIP, BYTES), ("ExtMetadataLengthLittleEndian",), (_t("ExtMetadataLengthLittleEndian"),)),
    C("R-EXT-2a", "raw element bytes are row-major, little-endian, without padding",
      (TENSOR, "Required.TensorDtype.*", ROUNDTRIP, BYTES),
      ("RawBytesBigEndian",), (_t("RawBytesBigEndian"),)),
    C("R-EXT-2b", "an encoder MUST send the typecode the manifest gives (Array[q]: q)", (BYTES, ROUNDTRIP),
      ("ArrayTypecodeUnsigned",), (_t("ArrayTypecodeUnsigned"),)),
    C("R-EXT-3a", "a decoder MUST reject a buffer extension whose metadata length, metadata, shape, dtype or "
                  "raw length "
      "is wrong", (REFUSES,), ("TensorRawLengthUnchecked", "UnknownDtypesAsBytes"),
      (_t("TensorRawLengthUnchecked"), "testee --break accept-all")),
    C("R-EXT-3b", "a decoder MUST refuse numpy dtypes that hold objects (|O)", ("Required.Refuses.NDArray.*",),
      ("NdarrayDtypeChecksSkipped",), (_t("NdarrayDtypeChecksSkipped"),)),
    C("R-EXT-3c", "a decoder MUST refuse shapes beyond 64 dimensions or 64-bit sizes by name, never by running out of "
      "memory", ("Required.Refuses.Tensor.*",), ("LargeShapesDecodedEmpty",), (_t("LargeShapesDecodedEmpty"),)),
    C("R-EXT-3d", "structured, record and sub-array dtypes, dtypes of size 0 and non-string dtypes MUST be refused",
      ("Required.Refuses.NDArray.*",), ("NdarrayDtypeChecksSkipped",), (_t("NdarrayDtypeChecksSkipped"),)),
    C("R-EXT-3e", "a U array MUST hold only Unicode code points", ("Required.Refuses.NDArray.*",),
      ("NdarrayDtypeChecksSkipped",), (_t("NdarrayDtypeChecksSkipped"),)),
    C("R-EXT-4a", "unknown extension codes MUST decode to an opaque value that encodes to the same bytes",
      ("Required.Accepts.*.UnknownExtensionForwarded",), ("UnknownExtRefused",), (_t("UnknownExtRefused"),)),
    C("R-EXT-6a", "an encoder MUST send a big-endian ndarray as it is, never converted",
      ("Required.ByteOrder.*.BigEndianKept.*",), ("BigEndianNdarraysConverted",), (_t("BigEndianNdarraysConverted"),)),
    C("R-EXT-6b", "a decoder MUST accept both byte orders and keep the dtype string",
      ("Required.ByteOrder.*.BigEndianKept.*",), ("NdarraysDecodedNative",), (_t("NdarraysDecodedNative"),)),
    C("R-TEN-1a", "encoders MUST write the table's dtype names, the raw bytes never converted",
      ("Required.Tensor.*.Exact.*", "Required.TensorDtype.*"), ("TensorDtypeRenamed", "UpcastsBfloat16"),
      (_t("TensorDtypeRenamed"),)),
    C("R-TEN-1b", "decoders MUST accept every name of the "
                  "table", ("Required.TensorDtype.*",), ("KnowsOnlyCommonDtypes",),
      (_t("KnowsOnlyCommonDtypes"),)),
    C("R-TEN-1c", "decoders MUST refuse any other dtype name", (REFUSES,), ("UnknownDtypesAsBytes",),
      (_t("UnknownDtypesAsBytes"),)),
    C("R-TEN-1d", "an encoder MUST refuse to send a quantized tensor", (REFUSES,), ("QuantizedSentAsIntegers",),
      (_t("QuantizedSentAsIntegers"),)),
    C("R-TEN-1e", "a decoder MUST refuse quantized dtypes", (REFUSES,), ("QuantizedDtypesDecoded",),
      (_t("QuantizedDtypesDecoded"),)),
    C("R-TEN-2a", "a receiver MUST restore exactly the shape: 0-d stays 0-d, an empty tensor keeps its dimensions",
      ("Required.Tensor.zero_dim.*", "Required.Tensor.empty.*"), ("ZeroDimAsShapeOne", "EmptyShapeFlattened"),
      (_t("ZeroDimAsShapeOne"), _t("EmptyShapeFlattened"))),
    C("R-TEN-3a", "a receiver MUST restore the tensor on its device and fail the decode, naming it, when the "
                  "device does "
      "not exist there", ("Required.Tensor.*.DeviceKept", REFUSES), ("TensorDeviceIgnored",),
      (_t("TensorDeviceIgnored"), "testee --break device-to-cpu")),
    C("R-TEN-3b", "an implementation that holds tensors as values MUST accept every <type>:<index> device (index 0 to "
      "127) and carry the string unchanged", ("Required.Tensor.*.DeviceKept",), ("TensorDeviceIgnored",),
      ("testee --tensors values --break device-to-cpu",)),
    C("R-TEN-4a", "a non-contiguous tensor or a view MUST be sent as its contiguous copy with equal values", (TENSOR,),
      ("ViewBytesNotContiguous", "IgnoresStorageOffset"), no_testee="view"),
    C("R-TEN-4b", "a tensor that requires grad MUST arrive detached, requires_grad=False, under both transports",
      (TENSOR,), ("KeepsRequiresGradUnderPickle",), no_testee="view"),
    C("R-TEN-5a", "a received tensor owns its memory: mutating it changes no sender or socket buffer",
      ("Required.ZeroCopy.*.BufferReuseSafe", "Required.TensorMemory.*"),
      ("UnsafeZeroCopy", "TensorSharesReceiveBuffer"),
      no_testee="process"),
    C("R-TEN-5b", "a received ndarray or array.array owns its memory: writable, sharing no bytes with the buffer",
      ("Required.TensorMemory.ndarray.*", "Required.TensorMemory.array.*"), ("NdarraysShareReceiveBuffer",),
      no_testee="process"),
    C("R-PW-1a", "under msgpack the sender MUST wrap each PickleWrapper-typed value as part of encoding",
      ("Required.Unwrap.*", "Required.Trace.*"), ("WrapperContentsLost",), (_t("WrapperContentsLost"),)),
    C("R-PW-1b", "empty and falsy values at PickleWrapper positions are wrapped like any other, never sent as None",
      ("Required.EveryEdge.*.PickleWrapperFalsy.*",), ("FalsyOpaqueValuesSentAsNone",),
      ("testee --break falsy-wrap-nil",)),
    C("R-PW-1c", "the object arrives whole: every attribute of the implementation's own payload survives the wrapper",
      ("Required.Payload.*.StateKept.*", "Required.ReceivePath.*"), ("TimeStatsDropsAField",), no_testee="payload"),
    C("R-PW-2a", "wrapper positions are the declared field types only: an implementation MUST NOT guess wrappers from "
      "values", (ROUNDTRIP,), ("GuessesWrappersFromValues",), (_t("GuessesWrappersFromValues"),)),
    C("R-PW-3a", "every receive path MUST open every wrapper before it reads, changes or forwards the message",
      ("Required.Unwrap.*.NoWrapperLeft.*",), ("ForgetsUnwrap", "UnwrapSkipped"), ("testee --break no-unwrap",)),
    C("R-PW-3b", "the engine's own receive paths (data-parallel controller, scheduler after a broadcast, the way back) "
      "unwrap", ("Required.ReceivePath.*", "Required.E2E.*.NoWrapperPastReceive"),
      ("ControllerSkipsUnwrap", "SchedulerSkipsUnwrap", "DetokenizerSkipsUnwrap"), no_testee="engine"),
    C("R-PW-3c", "every item of a batch that reaches a receive path is unwrapped, not only the first",
      ("Required.ReceivePath.Batch*.Scheduler.*",), ("SchedulerUnwrapsFirstSubRequestOnly",), no_testee="engine"),
    C("R-PW-3d", "a receiver's top-level decode opens a top-level PickleWrapper (the controller's handshakes)",
      ("Required.Payload.PickleWrapper.StateKept.*",), ("TopLevelWrapperKeptClosed",), no_testee="process"),
    C("R-PW-5a", "a receive path for an untrusted peer MUST NOT pass wire bytes to pickle or any deserializer that can "
      "call code", ("Required.Security.*",), ("UnpicklesWireBytes", "UntrustedReceiveUnpickles",
                                              "UntrustedReceiveUnpicklesAllowListed"),
      ("testee --break unsafe-receive",)),
    C("R-PW-6a", "wrapper data bytes are forwarded unchanged; an implementation that cannot pickle MUST NOT write the "
      "object unwrapped in the field's place", ("Required.Unwrap.*", BYTES), ("WrapperContentsLost",),
      (_t("WrapperContentsLost"),)),
    C("R-HTTP-1a", "the HTTP bridge MUST decode base64 fields into bytes before the struct is built",
      ("Required.HttpBase64.*.Decodes",), ("NoBase64",), (_t("NoBase64"),)),
    C("R-HTTP-2a", "malformed base64 MUST fail validation with an error that names the field",
      ("Required.HttpBase64.*.RejectsMalformed",), ("NoBase64",), (_t("NoBase64"),)),
    C("R-HTTP-2b", "unknown keys MUST be rejected", ("Required.Http.*.RejectsUnknownKey",),
      ("HttpUnknownKeysAccepted",), ("testee --break http-unknown-keys",)),
    C("R-HTTP-2c", "missing keys take the field's default (factory defaults included)",
      ("Required.Http.*.OmittedFieldsTakeDefaults",), ("HttpFactoryRequired",),
      ("testee --break http-factory-required",)),
    C("R-NONE-1a", "each nested-optional logprob shape ([[null, x]], [[]], [null, [...], []]) MUST be carried "
                   "unchanged",
      ("Required.Logprobs.*.NestedNone.*",), ("NarrowLogprobs", "DropsNoneInLists", "NoneInListsAsZero"),
      (_t("DropsNoneInLists"),)),
    C("R-TRACE-1a", "a receiving process that traces MUST open its span as a child of the carrier in the time stats",
      ("Required.Trace.*", "Required.E2E.*.OneLinkedTrace.*"), ("DropsTraceUnderMsgpack",),
      (_t("WrapperContentsLost"),)),
    C("R-TRACE-2a", "every hop that forwards a request MUST carry the context on, under both transports",
      ("Required.Trace.*.ContextSurvivesForwarding.*",), ("DropsTraceUnderMsgpack",), (_t("WrapperContentsLost"),)),
    C("R-TRACE-3a", "the context MUST survive serialization (no unpicklable state)",
      ("Required.Trace.*.ContextSurvivesForwarding.*",), ("DropsTraceUnderMsgpack",), (_t("WrapperContentsLost"),)),
    C("R-NORM-1a", "for fields with a precise type the two transports MUST deliver identical values",
      ("Required.CrossTransport.*", "Required.Tensor.*.SameOnBothTransports"), ("KeepsRequiresGradUnderPickle",),
      (_t("PickleNormalizesLikeMsgpack"),)),
    C("R-NORM-2a", "an implementation MUST NOT add normalizations beyond the documented ones",
      (ROUNDTRIP, "Required.CrossTransport.*"), ("PickleNormalizesLikeMsgpack",), (_t("PickleNormalizesLikeMsgpack"),)),
    C("R-TRN-2a", "a receiver MUST decode each received ZeroMQ message whole", ("Required.Socket.*.ArrivesWhole.*",),
      ("SplitsMessageIntoFrames",), no_testee="process"),
    C("R-TRN-3a", "a zero-copy send MUST NOT return before the transport released the caller's buffer, or MUST copy it",
      ("Required.ZeroCopy.*.BufferReuseSafe",), ("UnsafeZeroCopy",), no_testee="process"),
    C("R-SEC-1a", "= R-PW-5: an untrusted peer's bytes never reach "
                  "pickle", ("Required.Security.*.NoPickleFromUntrustedPeer",),
      ("UnpicklesWireBytes",), ("testee --break unsafe-receive",)),
    C("R-SEC-2a", "hostile bytes MUST end in an error, never in a crash or an exhausted process", (REFUSES,),
      ("WrongElementTypeKeptAsIs", "LargeShapesDecodedEmpty"), ("testee --break accept-all",)),
    C("R-DP-1a", "the controller MUST decode every message with the full union, route each tokenized request to "
                 "exactly "
      "one rank and broadcast control messages", RECEIVE, ("ControllerSkipsUnwrap", "SchedulerSkipsUnwrap"),
      no_testee="engine"),
    C("R-DP-2a", "the controller's receive path MUST unwrap before reading time stats or opening its span",
      ("Required.ReceivePath.*.Controller.*",), ("ControllerSkipsUnwrap",), no_testee="engine"),
    C("R-DP-3a", "a forwarded message MUST equal the received one except the documented fields", RECEIVE,
      ("ControllerSkipsUnwrap", "SchedulerSkipsUnwrap"), no_testee="engine"),
    C("R-DP-4a", "the controller MUST continue the request's "
                 "trace", ("Required.Trace.*", "Required.E2E.*.OneLinkedTrace.*"),
      ("DropsTraceUnderMsgpack",), no_testee="engine"),
    C("R-DP-5a", "a request the controller cannot route MUST be answered with an AbortReq carrying a finished_reason",
      ("Required.ReceivePath.*.Unroutable.*",), ("ControllerDropsUnroutable",), no_testee="engine"),
    C("R-VEC-1a", "an implementation MUST decode every vector of its manifest to the value its JSON view describes",
      ("Required.Golden.*.DecodesVector.*",), ("ReorderedFields",), ("testee --break drop-field",)),
    C("R-VEC-2a", "peers MUST NOT depend on the canonical bytes: decoders accept every valid encoding", (ACCEPTS,),
      ("RequiresCanonicalBytes",), (_t("RequiresCanonicalBytes"),)),
    C("R-VEC-3a", "an encoder MUST produce the vector's msgpack form, header widths and set order aside", (BYTES,),
      ("Float32Narrowing", "IntegralFloatsAsInts", "DropsTrailingDefaults"),
      ("testee --break float32", "testee --break int-floats", "testee --break drop-defaults")),
    C("R-VER-1a", "an implementation MUST define every struct of its manifest with the same tag, fields, order, types "
      "and defaults, and no other messages", ("Required.Catalogue.*.MatchesManifest",
                                             "Required.Catalogue.All.NoUnlistedMessages"),
      ("NarrowRids", "ReorderedFields"), no_testee="catalogue"),
)

#: MUSTs that are not a property of one implementation's wire behaviour, so no suite check
#: can fail them; the table shows the reason instead of a proof.
EXEMPT: dict[str, str] = {
    "R-TRN-1": "a deployment rule (both ends of a link use one transport); every check runs both ends with "
               "the same transport, under each",
    "R-DP-6": "a deployment rule (the controller at least as new as the tokenizer manager)",
    "R-VER-4": "a rule for releases of a manifest (regenerate vectors and structs), enforced by this "
               "project's tests (tests/test_golden.py, tests/test_reference_structs.py)",
}
