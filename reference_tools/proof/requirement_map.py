"""Which Required checks test each clause of each MUST, and which planted violations prove them.

Every MUST sentence of spec/SPEC.md is split into its clauses (ids R-MSG-4a, R-MSG-4b, ...);
spec/clauses.md, which the suite owns, gives each its text and its Required checks (check-id
globs). Here each clause (``PROOFS``, joined into ``CLAUSES``) gets a planted violation on both
paths: **in-process** (a mutant of reference_tools/proof/mutants.py, a defective adapter of
tests/, an engine whose receive path skips its unwrap) and **testee** (the same kind of bug in a
testee process, seen by the runner only through the protocol: a ``--break`` mode of
reference_impl/testee.py, or a mutant behind the protocol, reference_tools/proof/mutant_testee.py).
A clause that cannot apply to one path says why (``NO_TESTEE_PATH``, few and reasoned); a clause
whose check or violations are being written elsewhere is ``pending`` with what is missing.

Edit spec/clauses.md and this file when a check or a requirement is added;
`python -m reference_tools.proof table` regenerates docs/requirements.md and
tests/test_requirement_table.py keeps all three honest.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from conformance.requirements import clauses as spec_clauses

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
    _v(MUTANTS, "DuplicateKeysFirstWins", "Required.Accepts.DumperControlReqInput.DuplicateKeyLastValue",
       "Required.Accepts.DumperControlReqInput.CollidingKeysKeptOnce"),
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
            "Required.Refuses.ActiveRanksOutput.MissingRequired.status.Decode",
            "Required.Refuses.BatchEmbeddingOutput.FloatKeyForInt.embeddings.Decode"),
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
    *(_v(MUTANTS, name, "Required.HttpBase64.UpdateWeightsFromTensorReqInput.Corpus.json",
         "Required.HttpBase64.LoadLoRAAdapterFromTensorsReqInput.Corpus.python")
      for name in ("Base64Lenient", "Base64UrlSafeAccepted", "Base64PaddingIgnored", "Base64WhitespaceStripped")),
    _v(MUTANTS, "Base64JsonModeOnly", "Required.HttpBase64.UpdateWeightsFromTensorReqInput.Corpus.python"),
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
    _v(MUTANTS, "MmDataOnInstance", "Required.EnginePayload.mm_items.StateKept.pickle",
       "Required.EnginePayload.mm_items.StateKept.msgpack"),
    _v(MUTANTS, "NestedMapsNotDecoded", "Required.EnginePayload.mm_items.StateKept.msgpack"),
    # -- the engine's own tracing, enabled, across processes (run_traced)
    _v(MUTANTS, "TraceCarrierFromCurrentContext", "Required.Trace.Controller.OneLinkedTrace.msgpack",
       "Required.Trace.Scheduler.OneLinkedTrace.pickle"),
    _v(MUTANTS, "TraceCarrierDroppedOnReceive", "Required.Trace.Controller.OneLinkedTrace.pickle",
       "Required.Trace.Scheduler.OneLinkedTrace.msgpack"),
    _v(MUTANTS, "TraceCarrierNotAdvanced", "Required.Trace.Scheduler.OneLinkedTrace.msgpack"),
    _v(MUTANTS, "NdarraysShareReceiveBuffer", "Required.TensorMemory.ndarray.OwnsMemory.msgpack"),
    _testee("colliding-keys", "Required.Accepts.DumperControlReqInput.CollidingKeysNotWritten"),
    # -- the implementation's own pipeline (R-PIPE): the engine's source edited in every process
    _v(MUTANTS, "ControllerRoutesPickle", "Required.Pipeline.dp2-total_tokens.SameAsBaseline.msgpack",
       "Required.Pipeline.dp2-total_tokens.SelectedTransportOnEverySocket.msgpack", transport="msgpack"),
    _v(MUTANTS, "ReceiveSocketsCapped", "Required.Pipeline.dp1.AnswersEveryRequest.msgpack",
       "Required.Pipeline.dp1.ConservesWhatWasSent.msgpack", transport="msgpack"),
    _v(MUTANTS, "EverySendTwice", "Required.Pipeline.dp1.DeliveredExactlyOnce.msgpack", transport="msgpack"),
    _v(MUTANTS, "TransportSwitchTruthy", "Required.Pipeline.dp1.SelectedTransportOnEverySocket.msgpack",
       transport="msgpack"),
    _v(MUTANTS, "DetokenizerDropsCustomizedInfo", "Required.Pipeline.dp1.ConservesWhatWasSent.msgpack",
       transport="msgpack"),
    _v(MUTANTS, "DetokenizerDropsHiddenStates", "Required.Pipeline.dp1.ConservesWhatWasSent.msgpack",
       transport="msgpack"),
    _v(MUTANTS, "OutputCustomizedInfoUnwrapped", "Required.Pipeline.dp1.AnswersEveryRequest.msgpack",
       transport="msgpack"),
    _testee("keep-colliding-keys", "Required.Accepts.DumperControlReqInput.CollidingKeysKeptOnce"),
    _v(MUTANTS, "IntKeysCoerced", "Required.Refuses.BatchEmbeddingOutput.FloatKeyForInt.embeddings.Decode",
       "Required.Refuses.BatchEmbeddingOutput.BoolKeyForInt.embeddings.Decode"),
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
    "Base64Lenient": ("Required.HttpBase64.UpdateWeightsFromTensorReqInput.Corpus.json",),
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
    "pipeline": "a pipeline run drives the implementation's own server and processes (its HTTP app, senders, "
                "receive paths, output building, its transport switch); a testee is a codec behind the protocol "
                "(spec/testee.md ops), with no pipeline of its own to run",
    "python-http": "the testee protocol's http op carries the JSON text; validating a parsed body in pydantic's Python "
                   "mode, as a FastAPI server does, is a Python library's step (validate_http_python) with no form in "
                   "the protocol, so a testee's bridge is judged on the JSON text only (R-HTTP-3a)",
    "view": "a JSON view (SPEC 13.3) carries a tensor's value only: no strides, storage offset or requires_grad "
            "reach a testee, so it never holds the non-contiguous or grad-requiring tensor the clause is about",
}

@dataclass(frozen=True)
class Proof:
    """The planted violations of one clause per path, or why it has none there."""

    in_process: tuple[str, ...]
    testee: tuple[str, ...] = ()
    no_testee: str = ""
    pending: str = ""


P = Proof
#: Per clause of spec/clauses.md (its text and checks live there, owned by the suite): the
#: violations that prove it. A clause of the table missing here has none (the table test says so).
PROOFS: dict[str, Proof] = {
    "R-MSG-1a": P(("QualifiedTag",), (_t("QualifiedTag"),)),
    "R-MSG-1b": P(("SwapsFirstTwoFields",), (_t("SwapsFirstTwoFields"),)),
    "R-MSG-2a": P(("DropsTrailingDefaults",), ("testee --break drop-defaults",)),
    "R-MSG-2b": P(("AppendsExtraField",), (_t("AppendsExtraField"),)),
    "R-MSG-2c": P(("SwapsFirstTwoFields",), (_t("SwapsFirstTwoFields"),)),
    "R-MSG-4a": P(("MapsInReverseOrder",), (_t("MapsInReverseOrder"),)),
    "R-MSG-4b": P(("OmitsEqualDefaults",), (_t("OmitsEqualDefaults"),)),
    "R-MSG-4c": P(("MapDefaultsNotFilled",), ("testee --break no-map-defaults",)),
    "R-MSG-4d": P(("MapUnknownKeysRefused",), ("testee --break refuse-unknown-map-keys",)),
    "R-MSG-5a": P(("RefusesShortArrays",), (_t("RefusesShortArrays"),)),
    "R-MSG-5b": P(("RefusesExtraElements",), (_t("RefusesExtraElements"),)),
    "R-MSG-5c": P(("DefaultsForRequiredFields", "WrongElementTypeKeptAsIs", "UnknownTagDecodesAsNone"),
                  ("testee --break accept-all",)),
    "R-MSG-6a": P(("TopLevelNoneRefused",), (_t("TopLevelNoneRefused"),)),
    "R-MSG-6b": P(("NoTopLevelStr", "TopLevelStrDecodedAsBytes"), (_t("TopLevelStrDecodedAsBytes"),)),
    "R-MSG-7a": P(("CustomTypesNotInUnion",), no_testee="catalogue"),
    "R-MSG-8a": P(("NoLateSubclasses",), ("testee --break forget-define",)),
    "R-MSG-9a": P(("SwapsFirstTwoFields",), (_t("QualifiedTag"),)),
    "R-MSG-10a": P(("NarrowRids", "NarrowLogprobs"), no_testee="catalogue"),
    "R-MSG-11a": P(("DefaultsForRequiredFields", "UnknownTagDecodesAsNone", "WrongElementTypeKeptAsIs"),
                   ("testee --break accept-all",)),
    "R-MSG-11b": P(("IgnoresTrailingBytes",), (_t("IgnoresTrailingBytes"),)),
    "R-MSG-11c": P(("TensorRawLengthUnchecked",), (_t("TensorRawLengthUnchecked"),)),
    "R-MSG-11d": P(("TupleAnyLength",), ("testee --break tuple-any-length",)),
    "R-VAL-1a": P(("ClampsLargeInts",), (_t("ClampsLargeInts"),)),
    "R-VAL-1b": P(("OversizedIntsClamped",), (_t("OversizedIntsClamped"),)),
    "R-VAL-2a": P(("Float32Narrowing", "IntegralFloatsAsInts"),
                  ("testee --break float32", "testee --break int-floats")),
    "R-VAL-2b": P(("RefusesIntsForFloats", "RequiresCanonicalBytes"),
                  (_t("RefusesIntsForFloats"), _t("RequiresCanonicalBytes"))),
    "R-VAL-2c": P(("CanonicalNaN",), (_t("CanonicalNaN"),)),
    "R-VAL-2d": P(("NonFiniteInListsAsNil",), ("testee --break nonfinite-nil",)),
    "R-VAL-3a": P(("SurrogatesReplaced",), (_t("SurrogatesReplaced"),)),
    "R-VAL-4a": P(("EnumByName", "UntypedDecode"), (_t("EnumByName"),)),
    "R-VAL-5a": P(("WideningCanonicalizesNaN",), (_t("WideningCanonicalizesNaN"),)),
    "R-VAL-6a": P(("CollidingKeysWritten",), ("testee --break colliding-keys",)),
    "R-VAL-7a": P(("NumpyBoolEncodedAsInt",), no_testee="numpy"),
    "R-VAL-8a": P(("NumpyFloatsRoundedToShortest",), no_testee="numpy"),
    "R-VAL-9a": P(("ZeroDimAsShapeOne",), (_t("ZeroDimAsShapeOne"),)),
    "R-VAL-6b": P(("DuplicateKeysFirstWins",), (_t("DuplicateKeysFirstWins"),)),
    "R-VAL-6c": P(("DuplicateKeysFirstWins",), ("testee --break keep-colliding-keys",)),
    "R-VAL-6d": P(("IntKeysCoerced",), ("testee --break accept-all",)),
    "R-EXT-1a": P(("ExtMetadataLengthLittleEndian",), (_t("ExtMetadataLengthLittleEndian"),)),
    "R-EXT-2a": P(("RawBytesBigEndian",), (_t("RawBytesBigEndian"),)),
    "R-EXT-2b": P(("ArrayTypecodeUnsigned",), (_t("ArrayTypecodeUnsigned"),)),
    "R-EXT-3a": P(("TensorRawLengthUnchecked", "UnknownDtypesAsBytes"),
                  (_t("TensorRawLengthUnchecked"), "testee --break accept-all")),
    "R-EXT-3b": P(("NdarrayDtypeChecksSkipped",), (_t("NdarrayDtypeChecksSkipped"),)),
    "R-EXT-3c": P(("LargeShapesDecodedEmpty",), (_t("LargeShapesDecodedEmpty"),)),
    "R-EXT-3d": P(("NdarrayDtypeChecksSkipped",), (_t("NdarrayDtypeChecksSkipped"),)),
    "R-EXT-3e": P(("NdarrayDtypeChecksSkipped",), (_t("NdarrayDtypeChecksSkipped"),)),
    "R-EXT-4a": P(("UnknownExtRefused",), (_t("UnknownExtRefused"),)),
    "R-EXT-6a": P(("BigEndianNdarraysConverted",), (_t("BigEndianNdarraysConverted"),)),
    "R-EXT-6b": P(("NdarraysDecodedNative",), (_t("NdarraysDecodedNative"),)),
    "R-TEN-1a": P(("TensorDtypeRenamed", "UpcastsBfloat16"), (_t("TensorDtypeRenamed"),)),
    "R-TEN-1b": P(("KnowsOnlyCommonDtypes",), (_t("KnowsOnlyCommonDtypes"),)),
    "R-TEN-1c": P(("UnknownDtypesAsBytes",), (_t("UnknownDtypesAsBytes"),)),
    "R-TEN-1d": P(("QuantizedSentAsIntegers",), (_t("QuantizedSentAsIntegers"),)),
    "R-TEN-1e": P(("QuantizedDtypesDecoded",), (_t("QuantizedDtypesDecoded"),)),
    "R-TEN-2a": P(("ZeroDimAsShapeOne", "EmptyShapeFlattened"), (_t("ZeroDimAsShapeOne"), _t("EmptyShapeFlattened"))),
    "R-TEN-3a": P(("TensorDeviceIgnored",), (_t("TensorDeviceIgnored"), "testee --break device-to-cpu")),
    "R-TEN-3b": P(("TensorDeviceIgnored",), ("testee --tensors values --break device-to-cpu",)),
    "R-TEN-4a": P(("ViewBytesNotContiguous", "IgnoresStorageOffset"), no_testee="view"),
    "R-TEN-4b": P(("KeepsRequiresGradUnderPickle",), no_testee="view"),
    "R-TEN-5a": P(("UnsafeZeroCopy", "TensorSharesReceiveBuffer"), no_testee="process"),
    "R-TEN-5b": P(("NdarraysShareReceiveBuffer",), no_testee="process"),
    "R-PW-1a": P(("WrapperContentsLost",), (_t("WrapperContentsLost"),)),
    "R-PW-1b": P(("FalsyOpaqueValuesSentAsNone",), ("testee --break falsy-wrap-nil",)),
    "R-PW-1c": P(("TimeStatsDropsAField",), no_testee="payload"),
    "R-PW-2a": P(("GuessesWrappersFromValues",), (_t("GuessesWrappersFromValues"),)),
    "R-PW-3a": P(("ForgetsUnwrap", "UnwrapSkipped"), ("testee --break no-unwrap",)),
    "R-PW-3b": P(("ControllerSkipsUnwrap", "SchedulerSkipsUnwrap", "DetokenizerSkipsUnwrap"), no_testee="engine"),
    "R-PW-3c": P(("SchedulerUnwrapsFirstSubRequestOnly",), no_testee="engine"),
    "R-PW-3d": P(("TopLevelWrapperKeptClosed",), no_testee="process"),
    "R-PW-5a": P(("UnpicklesWireBytes", "UntrustedReceiveUnpickles", "UntrustedReceiveUnpicklesAllowListed"),
                 ("testee --break unsafe-receive",)),
    "R-PW-6a": P(("WrapperContentsLost",), (_t("WrapperContentsLost"),)),
    "R-PW-7a": P(("MmDataOnInstance",), no_testee="payload"),
    "R-PW-7b": P(("NestedMapsNotDecoded",), no_testee="payload"),
    "R-HTTP-1a": P(("NoBase64",), (_t("NoBase64"),)),
    "R-HTTP-2a": P(("NoBase64",), (_t("NoBase64"),)),
    "R-HTTP-2b": P(("HttpUnknownKeysAccepted",), ("testee --break http-unknown-keys",)),
    "R-HTTP-2c": P(("HttpFactoryRequired",), ("testee --break http-factory-required",)),
    "R-HTTP-3a": P(("Base64Lenient", "Base64UrlSafeAccepted", "Base64PaddingIgnored", "Base64WhitespaceStripped"),
                   (_t("Base64Lenient"),)),
    "R-HTTP-3b": P(("Base64JsonModeOnly",), no_testee="python-http"),
    "R-NONE-1a": P(("NarrowLogprobs", "DropsNoneInLists", "NoneInListsAsZero"), (_t("DropsNoneInLists"),)),
    "R-TRACE-1a": P(("DropsTraceUnderMsgpack",), (_t("WrapperContentsLost"),)),
    "R-TRACE-2a": P(("DropsTraceUnderMsgpack",), (_t("WrapperContentsLost"),)),
    "R-TRACE-3a": P(("DropsTraceUnderMsgpack",), (_t("WrapperContentsLost"),)),
    "R-TRACE-4a": P(("TraceCarrierFromCurrentContext", "TraceCarrierDroppedOnReceive", "TraceCarrierNotAdvanced"),
                    no_testee="engine"),
    "R-NORM-1a": P(("KeepsRequiresGradUnderPickle",), (_t("PickleNormalizesLikeMsgpack"),)),
    "R-NORM-2a": P(("PickleNormalizesLikeMsgpack",), (_t("PickleNormalizesLikeMsgpack"),)),
    "R-TRN-2a": P(("SplitsMessageIntoFrames",), no_testee="process"),
    "R-TRN-3a": P(("UnsafeZeroCopy",), no_testee="process"),
    "R-SEC-1a": P(("UnpicklesWireBytes",), ("testee --break unsafe-receive",)),
    "R-SEC-2a": P(("WrongElementTypeKeptAsIs", "LargeShapesDecodedEmpty"), ("testee --break accept-all",)),
    "R-DP-1a": P(("ControllerSkipsUnwrap", "SchedulerSkipsUnwrap"), no_testee="engine"),
    "R-DP-2a": P(("ControllerSkipsUnwrap",), no_testee="engine"),
    "R-DP-3a": P(("ControllerSkipsUnwrap", "SchedulerSkipsUnwrap"), no_testee="engine"),
    "R-DP-4a": P(("DropsTraceUnderMsgpack",), no_testee="engine"),
    "R-DP-5a": P(("ControllerDropsUnroutable",), no_testee="engine"),
    "R-VEC-1a": P(("ReorderedFields",), ("testee --break drop-field",)),
    "R-VEC-2a": P(("RequiresCanonicalBytes",), (_t("RequiresCanonicalBytes"),)),
    "R-VEC-3a": P(("Float32Narrowing", "IntegralFloatsAsInts", "DropsTrailingDefaults"),
                  ("testee --break float32", "testee --break int-floats", "testee --break drop-defaults")),
    "R-VER-1a": P(("NarrowRids", "ReorderedFields"), no_testee="catalogue"),
    "R-PIPE-1a": P(("ControllerRoutesPickle",), no_testee="pipeline"),
    "R-PIPE-1b": P(("DetokenizerDropsCustomizedInfo", "DetokenizerDropsHiddenStates"), no_testee="pipeline"),
    "R-PIPE-2a": P(("EverySendTwice",), no_testee="pipeline"),
    "R-PIPE-3a": P(("TransportSwitchTruthy", "ControllerRoutesPickle"), no_testee="pipeline"),
    "R-PIPE-4a": P(("ReceiveSocketsCapped",), no_testee="pipeline"),
    "R-PIPE-5a": P(("OutputCustomizedInfoUnwrapped",), no_testee="pipeline"),
}


def _clauses() -> tuple[Clause, ...]:
    out = []
    for c in spec_clauses():
        proof = PROOFS.get(c.id, Proof(()))
        out.append(Clause(c.id, c.text, c.checks, proof.in_process, proof.testee, proof.no_testee, proof.pending))
    return tuple(out)


CLAUSES: tuple[Clause, ...] = _clauses()

#: MUSTs that are not a property of one implementation's wire behaviour, so no suite check
#: can fail them; the table shows the reason instead of a proof.
EXEMPT: dict[str, str] = {
    "R-TRN-1": "a deployment rule (both ends of a link use one transport); every check runs both ends with "
               "the same transport, under each",
    "R-DP-6": "a deployment rule (the controller at least as new as the tokenizer manager)",
    "R-VER-4": "a rule for releases of a manifest (regenerate vectors and structs), enforced by this "
               "project's tests (tests/test_golden.py, tests/test_reference_structs.py)",
}
