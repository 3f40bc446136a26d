//! Compile-time layout assertions, with the numbers measured from the QAIRT 2.43 headers
//! (`shared/reference/qnn-abi.md`; identical on x86_64 and aarch64 Linux).

use std::mem::{align_of, offset_of, size_of};

use super::*;

macro_rules! assert_layout {
    ($ty:ty, size $size:expr, align $align:expr $(, $field:ident @ $off:expr)* $(,)?) => {
        const _: () = {
            assert!(size_of::<$ty>() == $size);
            assert!(align_of::<$ty>() == $align);
            $(assert!(offset_of!($ty, $field) == $off);)*
        };
    };
}

assert_layout!(Qnn_Version_t, size 12, align 4, major @ 0, minor @ 4, patch @ 8);
assert_layout!(Qnn_ApiVersion_t, size 24, align 4, coreApiVersion @ 0, backendApiVersion @ 12);
assert_layout!(QnnInterface_ImplementationV2_32_t, size 568, align 8,
    propertyHasCapability @ 0, backendCreate @ 8, backendGetApiVersion @ 24, backendGetBuildId @ 32,
    backendFree @ 64, contextCreateFromBinary @ 104, contextFree @ 112, graphRetrieve @ 160,
    graphExecute @ 168, logCreate @ 200, logSetLogLevel @ 208, logFree @ 216, deviceCreate @ 320,
    deviceFree @ 344, errorGetMessage @ 384, contextCreateFromBinaryWithCallback @ 544,
    contextFreeBinarySectionUpdate @ 560);
assert_layout!(QnnInterface_t, size 608, align 8,
    backendId @ 0, providerName @ 8, apiVersion @ 16, table @ 40);
assert_layout!(QnnSystemInterface_ImplementationV1_7_t, size 128, align 8,
    systemContextCreate @ 0, systemContextGetBinaryInfo @ 8, systemContextGetMetaData @ 16,
    systemContextFree @ 24, systemProfileFreeSerializationTarget @ 120);
assert_layout!(QnnSystemInterface_t, size 160, align 8,
    backendId @ 0, providerName @ 8, systemApiVersion @ 16, table @ 32);

assert_layout!(Qnn_ScaleOffset_t, size 8, align 4, scale @ 0, offset @ 4);
assert_layout!(Qnn_AxisScaleOffset_t, size 16, align 8, axis @ 0, numScaleOffsets @ 4, scaleOffset @ 8);
assert_layout!(Qnn_BwScaleOffset_t, size 12, align 4, bitwidth @ 0, scale @ 4, offset @ 8);
assert_layout!(Qnn_BwAxisScaleOffset_t, size 32, align 8,
    bitwidth @ 0, axis @ 4, numElements @ 8, scales @ 16, offsets @ 24);
assert_layout!(Qnn_BlockEncoding_t, size 16, align 8, blockSize @ 0, scaleOffset @ 8);
assert_layout!(Qnn_FloatBlockEncoding_t, size 16, align 8, blockSize @ 0, floatScaleOffset @ 8);
assert_layout!(Qnn_BwFloatBlockEncoding_t, size 24, align 8,
    bitwidth @ 0, blockSize @ 8, floatScaleOffset @ 16);
assert_layout!(Qnn_QuantizeParamsUnion_t, size 32, align 8);
assert_layout!(Qnn_QuantizeParams_t, size 40, align 8,
    encodingDefinition @ 0, quantizationEncoding @ 4, encoding @ 8);
assert_layout!(Qnn_ClientBuffer_t, size 16, align 8, data @ 0, dataSize @ 8);
assert_layout!(Qnn_TensorMemory_t, size 16, align 8);
assert_layout!(Qnn_TensorV1_t, size 112, align 8,
    id @ 0, name @ 8, type_ @ 16, dataFormat @ 20, dataType @ 24, quantizeParams @ 32, rank @ 72,
    dimensions @ 80, memType @ 88, memory @ 96);
assert_layout!(Qnn_SparseLayoutHybridCoo_t, size 8, align 4,
    numSpecifiedElements @ 0, numSparseDimensions @ 4);
assert_layout!(Qnn_SparseParams_t, size 12, align 4, type_ @ 0, hybridCoo @ 4);
assert_layout!(Qnn_TensorV2_t, size 136, align 8,
    id @ 0, name @ 8, type_ @ 16, dataFormat @ 20, dataType @ 24, quantizeParams @ 32, rank @ 72,
    dimensions @ 80, memType @ 88, memory @ 96, isDynamicDimensions @ 112, sparseParams @ 120,
    isProduced @ 132);
assert_layout!(Qnn_TensorUnion_t, size 136, align 8);
assert_layout!(Qnn_Tensor_t, size 144, align 8, version @ 0, tensor @ 8);

assert_layout!(QnnSystemContext_BinaryInfoV1_t, size 128, align 8,
    backendId @ 0, buildId @ 8, coreApiVersion @ 16, backendApiVersion @ 28, socVersion @ 40,
    hwInfoBlobVersion @ 48, contextBlobVersion @ 60, hwInfoBlobSize @ 72, hwInfoBlob @ 80,
    contextBlobSize @ 88, numContextTensors @ 96, contextTensors @ 104, numGraphs @ 112,
    graphs @ 120);
assert_layout!(QnnSystemContext_BinaryInfoV2_t, size 136, align 8,
    backendId @ 0, buildId @ 8, coreApiVersion @ 16, backendApiVersion @ 28, socVersion @ 40,
    hwInfoBlobVersion @ 48, contextBlobVersion @ 60, hwInfoBlobSize @ 72, hwInfoBlob @ 80,
    contextBlobSize @ 88, numContextTensors @ 96, contextTensors @ 104, numGraphs @ 112,
    graphs @ 120, platformInfo @ 128);
assert_layout!(QnnSystemContext_BinaryInfoV3_t, size 136, align 8,
    backendId @ 0, buildId @ 8, coreApiVersion @ 16, backendApiVersion @ 28, socVersion @ 40,
    contextBlobVersion @ 48, contextBlobSize @ 64, numContextTensors @ 72, contextTensors @ 80,
    numGraphs @ 88, graphs @ 96, platformInfo @ 104, contextMetadataSize @ 112,
    contextMetadata @ 120, socModel @ 128);
assert_layout!(QnnSystemContext_BinaryInfoUnion_t, size 136, align 8);
assert_layout!(QnnSystemContext_BinaryInfo_t, size 144, align 8, version @ 0, info @ 8);
assert_layout!(QnnSystemContext_GraphInfoV1_t, size 40, align 8,
    graphName @ 0, numGraphInputs @ 8, graphInputs @ 16, numGraphOutputs @ 24, graphOutputs @ 32);
assert_layout!(QnnSystemContext_GraphInfoV2_t, size 56, align 8,
    graphName @ 0, numGraphInputs @ 8, graphInputs @ 16, numGraphOutputs @ 24, graphOutputs @ 32,
    numUpdateableTensors @ 40, updateableTensors @ 48);
assert_layout!(QnnSystemContext_GraphInfoV3_t, size 80, align 8,
    graphName @ 0, numGraphInputs @ 8, graphInputs @ 16, numGraphOutputs @ 24, graphOutputs @ 32,
    numUpdateableTensors @ 40, updateableTensors @ 48, graphBlobInfoSize @ 56, graphBlobInfo @ 64,
    startOpIndex @ 72, endOpIndex @ 76);
assert_layout!(QnnSystemContext_GraphInfoUnion_t, size 80, align 8);
assert_layout!(QnnSystemContext_GraphInfo_t, size 88, align 8, version @ 0, info @ 8);
