//! The declared layout of every `qnn_sys` type that crosses the C boundary, as one list.
//!
//! Each entry states the size, alignment and field offsets measured from the QAIRT 2.43 headers
//! (identical on x86_64 and aarch64 Linux; `qnn/sdk_layout/` checks them against headers
//! given with `QNN_SDK_ROOT`). The `layouts!`
//! macro turns that list into both
//! - compile-time assertions (size, alignment, every field offset, and, for structs, an
//!   exhaustive destructuring pattern so a field added to the Rust type but not to this list
//!   fails to compile), and
//! - the public table [`DECLARED`], which the maintainer tool in `qnn/sdk_layout/` compares,
//!   field by field, with bindgen's view of real headers (see `qnn/README.md`, "ABI layout check").

use std::mem::{align_of, offset_of, size_of};

use super::*;

/// One C struct or union as `qnn_sys` declares it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StructLayout {
    /// The C type name, e.g. `"Qnn_Tensor_t"`. C's anonymous unions that we gave a Rust name
    /// have no C name: they are named by the member that holds them, in bindgen's spelling,
    /// e.g. `"Qnn_Tensor_t.__bindgen_anon_1"` for [`Qnn_TensorUnion_t`].
    pub name: &'static str,
    /// The Rust type in `qnn_sys`, e.g. `"Qnn_TensorUnion_t"`.
    pub rust_name: &'static str,
    /// A C `union` (all fields at offset 0) rather than a `struct`.
    pub is_union: bool,
    pub size: usize,
    pub align: usize,
    /// Every field of the Rust type, in declaration order.
    pub fields: &'static [FieldLayout],
}

/// One field of a [`StructLayout`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldLayout {
    /// The C member name (`"type"`, not `"type_"`). A member that is an anonymous union in C is
    /// spelled as bindgen spells it, `"__bindgen_anon_1"`; a member of such a union that we hold
    /// directly is named by its path, `"__bindgen_anon_1.hybridCoo"`.
    pub name: &'static str,
    /// The Rust field name.
    pub rust_name: &'static str,
    pub offset: usize,
    /// `size_of` the Rust field's type (computed, not declared).
    pub size: usize,
}

/// `size_of` the type of `$ty.$field`, in a const context, without a value of `$ty`.
macro_rules! field_size {
    ($ty:ty, $field:ident) => {{
        const fn size_of_pointee<F>(_: *const F) -> usize {
            size_of::<F>()
        }
        let value = std::mem::MaybeUninit::<$ty>::uninit();
        // SAFETY: `&raw const` only projects the place of the field inside a live (if
        // uninitialised) local; nothing is read and no reference is created.
        size_of_pointee(unsafe { &raw const (*value.as_ptr()).$field })
    }};
}

macro_rules! layouts {
    ($(
        $kind:ident $ty:ident $(as $cname:literal)?, size $size:literal, align $align:literal {
            $($field:ident $(as $cfield:literal)? @ $off:literal),* $(,)?
        }
    )*) => {
        $(
            const _: () = {
                assert!(size_of::<$ty>() == $size);
                assert!(align_of::<$ty>() == $align);
                $(assert!(offset_of!($ty, $field) == $off);)*
            };
            layouts!(@exhaustive $kind $ty { $($field),* });
        )*

        /// Every struct and union of `qnn_sys` that crosses the C boundary, with all its
        /// fields. The same list produces this module's compile-time assertions.
        pub const DECLARED: &[StructLayout] = &[$(
            StructLayout {
                name: layouts!(@name stringify!($ty) $(, $cname)?),
                rust_name: stringify!($ty),
                is_union: layouts!(@is_union $kind),
                size: $size,
                align: $align,
                fields: &[$(
                    FieldLayout {
                        name: layouts!(@name stringify!($field) $(, $cfield)?),
                        rust_name: stringify!($field),
                        offset: $off,
                        size: field_size!($ty, $field),
                    }
                ),*],
            }
        ),*];
    };
    (@name $default:expr) => { $default };
    (@name $default:expr, $given:literal) => { $given };
    (@is_union struct) => { false };
    (@is_union union) => { true };
    // No `..`: a field of the Rust struct missing from the list is a compile error.
    (@exhaustive struct $ty:ident { $($field:ident),* }) => {
        const _: () = {
            #[allow(dead_code)]
            fn exhaustive(value: $ty) {
                let $ty { $($field: _),* } = value;
            }
        };
    };
    (@exhaustive union $ty:ident { $($field:ident),* }) => {};
}

layouts! {
    struct Qnn_Version_t, size 12, align 4 { major @ 0, minor @ 4, patch @ 8 }
    struct Qnn_ApiVersion_t, size 24, align 4 { coreApiVersion @ 0, backendApiVersion @ 12 }

    struct QnnInterface_ImplementationV2_32_t, size 568, align 8 {
        propertyHasCapability @ 0, backendCreate @ 8, backendSetConfig @ 16,
        backendGetApiVersion @ 24, backendGetBuildId @ 32, backendRegisterOpPackage @ 40,
        backendGetSupportedOperations @ 48, backendValidateOpConfig @ 56, backendFree @ 64,
        contextCreate @ 72, contextSetConfig @ 80, contextGetBinarySize @ 88,
        contextGetBinary @ 96, contextCreateFromBinary @ 104, contextFree @ 112,
        graphCreate @ 120, graphCreateSubgraph @ 128, graphSetConfig @ 136, graphAddNode @ 144,
        graphFinalize @ 152, graphRetrieve @ 160, graphExecute @ 168, graphExecuteAsync @ 176,
        tensorCreateContextTensor @ 184, tensorCreateGraphTensor @ 192, logCreate @ 200,
        logSetLogLevel @ 208, logFree @ 216, profileCreate @ 224, profileSetConfig @ 232,
        profileGetEvents @ 240, profileGetSubEvents @ 248, profileGetEventData @ 256,
        profileGetExtendedEventData @ 264, profileFree @ 272, memRegister @ 280,
        memDeRegister @ 288, deviceGetPlatformInfo @ 296, deviceFreePlatformInfo @ 304,
        deviceGetInfrastructure @ 312, deviceCreate @ 320, deviceSetConfig @ 328,
        deviceGetInfo @ 336, deviceFree @ 344, signalCreate @ 352, signalSetConfig @ 360,
        signalTrigger @ 368, signalFree @ 376, errorGetMessage @ 384,
        errorGetVerboseMessage @ 392, errorFreeVerboseMessage @ 400,
        graphPrepareExecutionEnvironment @ 408, graphReleaseExecutionEnvironment @ 416,
        graphGetProperty @ 424, contextValidateBinary @ 432,
        contextCreateFromBinaryWithSignal @ 440, contextCreateFromBinaryListAsync @ 448,
        tensorUpdateGraphTensors @ 456, tensorUpdateContextTensors @ 464,
        contextGetBinarySectionSize @ 472, contextGetBinarySection @ 480,
        contextApplyBinarySection @ 488, backendGetProperty @ 496, contextGetProperty @ 504,
        contextGetIncrementalBinary @ 512, contextReleaseIncrementalBinary @ 520,
        contextFinalize @ 528, globalConfigSet @ 536, contextCreateFromBinaryWithCallback @ 544,
        contextGetBinarySectionUpdate @ 552, contextFreeBinarySectionUpdate @ 560,
    }
    // C: `union { QnnInterface_ImplementationV2_32_t v2_32; }`, one member, held as the table.
    struct QnnInterface_t, size 608, align 8 {
        backendId @ 0, providerName @ 8, apiVersion @ 16, table as "__bindgen_anon_1" @ 40,
    }
    struct QnnSystemInterface_ImplementationV1_7_t, size 128, align 8 {
        systemContextCreate @ 0, systemContextGetBinaryInfo @ 8, systemContextGetMetaData @ 16,
        systemContextFree @ 24, systemTensorGetMemoryFootprint @ 32, systemLogCreate @ 40,
        systemLogSetLogLevel @ 48, systemLogFree @ 56, systemDlcCreateFromFile @ 64,
        systemDlcCreateFromBinary @ 72, systemDlcComposeGraphs @ 80,
        systemDlcGetOpMappings @ 88, systemDlcFree @ 96,
        systemProfileCreateSerializationTarget @ 104, systemProfileSerializeEventData @ 112,
        systemProfileFreeSerializationTarget @ 120,
    }
    // C: `union { QnnSystemInterface_ImplementationV1_7_t v1_7; }`, held as the table.
    struct QnnSystemInterface_t, size 160, align 8 {
        backendId @ 0, providerName @ 8, systemApiVersion @ 16, table as "__bindgen_anon_1" @ 32,
    }

    struct Qnn_NotifyStatus_t, size 8, align 8 { error @ 0 }
    struct Qnn_ErrorReportingConfig_t, size 8, align 4 { reportingLevel @ 0, storageLimit @ 4 }
    // C: `union { uint32_t depth; }`, its only member held directly.
    struct QnnContext_AsyncExecutionQueueDepth_t, size 8, align 4 {
        type_ as "type" @ 0, depth as "__bindgen_anon_1.depth" @ 4,
    }
    union QnnContext_ConfigUnion_t as "QnnContext_Config_t.__bindgen_anon_1", size 8, align 8 {
        customConfig @ 0, priority @ 0, errorConfig @ 0, oemString @ 0, asyncExeQueueDepth @ 0,
        enableGraphs @ 0, memoryLimitHint @ 0, isPersistentBinary @ 0,
        binaryCompatibilityType @ 0, isGraphInitDeferred @ 0, graphRetentionOrder @ 0,
    }
    struct QnnContext_Config_t, size 16, align 8 { option @ 0, value as "__bindgen_anon_1" @ 8 }

    struct Qnn_ScaleOffset_t, size 8, align 4 { scale @ 0, offset @ 4 }
    struct Qnn_AxisScaleOffset_t, size 16, align 8 {
        axis @ 0, numScaleOffsets @ 4, scaleOffset @ 8,
    }
    struct Qnn_BwScaleOffset_t, size 12, align 4 { bitwidth @ 0, scale @ 4, offset @ 8 }
    struct Qnn_BwAxisScaleOffset_t, size 32, align 8 {
        bitwidth @ 0, axis @ 4, numElements @ 8, scales @ 16, offsets @ 24,
    }
    struct Qnn_BlockEncoding_t, size 16, align 8 { blockSize @ 0, scaleOffset @ 8 }
    struct Qnn_FloatBlockEncoding_t, size 16, align 8 { blockSize @ 0, floatScaleOffset @ 8 }
    struct Qnn_BwFloatBlockEncoding_t, size 24, align 8 {
        bitwidth @ 0, blockSize @ 8, floatScaleOffset @ 16,
    }
    // `pointer` stands for the C members held by pointer; compared as the first of them.
    union Qnn_QuantizeParamsUnion_t as "Qnn_QuantizeParams_t.__bindgen_anon_1", size 32, align 8 {
        scaleOffsetEncoding @ 0, axisScaleOffsetEncoding @ 0, bwScaleOffsetEncoding @ 0,
        bwAxisScaleOffsetEncoding @ 0, blockEncoding @ 0, floatBlockEncoding @ 0,
        bwFloatBlockEncoding @ 0, pointer as "blockwiseExpansion" @ 0,
    }
    struct Qnn_QuantizeParams_t, size 40, align 8 {
        encodingDefinition @ 0, quantizationEncoding @ 4, encoding as "__bindgen_anon_1" @ 8,
    }
    struct Qnn_ClientBuffer_t, size 16, align 8 { data @ 0, dataSize @ 8 }
    // V2's union: V1's lacks `retrieveRaw` (same size); V1's `memory` is compared by size.
    union Qnn_TensorMemory_t as "Qnn_TensorV2_t.__bindgen_anon_1", size 16, align 8 {
        clientBuf @ 0, memHandle @ 0, retrieveRaw @ 0,
    }
    struct Qnn_TensorV1_t, size 112, align 8 {
        id @ 0, name @ 8, type_ as "type" @ 16, dataFormat @ 20, dataType @ 24,
        quantizeParams @ 32, rank @ 72, dimensions @ 80, memType @ 88,
        memory as "__bindgen_anon_1" @ 96,
    }
    struct Qnn_SparseLayoutHybridCoo_t, size 8, align 4 {
        numSpecifiedElements @ 0, numSparseDimensions @ 4,
    }
    // C: `union { Qnn_SparseLayoutHybridCoo_t hybridCoo; }`, its only member held directly.
    struct Qnn_SparseParams_t, size 12, align 4 {
        type_ as "type" @ 0, hybridCoo as "__bindgen_anon_1.hybridCoo" @ 4,
    }
    struct Qnn_TensorV2_t, size 136, align 8 {
        id @ 0, name @ 8, type_ as "type" @ 16, dataFormat @ 20, dataType @ 24,
        quantizeParams @ 32, rank @ 72, dimensions @ 80, memType @ 88,
        memory as "__bindgen_anon_1" @ 96, isDynamicDimensions @ 112, sparseParams @ 120,
        isProduced @ 132,
    }
    union Qnn_TensorUnion_t as "Qnn_Tensor_t.__bindgen_anon_1", size 136, align 8 {
        v1 @ 0, v2 @ 0,
    }
    struct Qnn_Tensor_t, size 144, align 8 { version @ 0, tensor as "__bindgen_anon_1" @ 8 }

    // QnnMem.h.
    struct Qnn_MemShape_t, size 24, align 8 { numDim @ 0, dimSize @ 8, shapeConfig @ 16 }
    struct Qnn_MemIonInfo_t, size 4, align 4 { fd @ 0 }
    struct Qnn_MemDmaBufInfo_t, size 16, align 8 { fd @ 0, data @ 8 }
    union Qnn_MemDescriptorUnion_t as "Qnn_MemDescriptor_t.__bindgen_anon_1", size 16, align 8 {
        ionInfo @ 0, customInfo @ 0, dmaBufInfo @ 0,
    }
    struct Qnn_MemDescriptor_t, size 48, align 8 {
        memShape @ 0, dataType @ 24, memType @ 28, info as "__bindgen_anon_1" @ 32,
    }

    struct QnnDevice_CoreInfoV1_t, size 16, align 8 {
        coreId @ 0, coreType @ 4, coreInfoExtension @ 8,
    }
    // C: `union { QnnDevice_CoreInfoV1_t v1; }`, its only member held directly (and likewise
    // in the two structs below).
    struct QnnDevice_CoreInfo_t, size 24, align 8 { version @ 0, v1 as "__bindgen_anon_1.v1" @ 8 }
    struct QnnDevice_HardwareDeviceInfoV1_t, size 32, align 8 {
        deviceId @ 0, deviceType @ 4, numCores @ 8, cores @ 16, deviceInfoExtension @ 24,
    }
    struct QnnDevice_HardwareDeviceInfo_t, size 40, align 8 {
        version @ 0, v1 as "__bindgen_anon_1.v1" @ 8,
    }
    struct QnnDevice_PlatformInfoV1_t, size 16, align 8 { numHwDevices @ 0, hwDevices @ 8 }
    struct QnnDevice_PlatformInfo_t, size 24, align 8 {
        version @ 0, v1 as "__bindgen_anon_1.v1" @ 8,
    }
    // HTP/QnnHtpDevice.h: what an HTP backend's deviceInfoExtension points to.
    struct QnnHtpDevice_OnChipDeviceInfoExtension_t, size 24, align 8 {
        vtcmSize @ 0, socModel @ 8, signedPdSupport @ 12, dlbcSupport @ 13, arch @ 16,
    }
    struct QnnHtpDevice_DeviceInfoExtension_t, size 32, align 8 {
        devType @ 0, onChipDevice as "__bindgen_anon_1.onChipDevice" @ 8,
    }
    // HTP/QnnHtpDevice.h and HTP/QnnHtpPerfInfrastructure.h: the perf infrastructure.
    struct QnnHtpDevice_PerfInfrastructure_t, size 32, align 8 {
        createPowerConfigId @ 0, destroyPowerConfigId @ 8, setPowerConfig @ 16,
        setMemoryConfig @ 24,
    }
    struct QnnHtpDevice_Infrastructure_t, size 40, align 8 {
        infraType @ 0, perfInfra as "__bindgen_anon_1.perfInfra" @ 8,
    }
    struct QnnHtpPerfInfrastructure_DcvsV3_t, size 64, align 4 {
        contextId @ 0, setDcvsEnable @ 4, dcvsEnable @ 8, powerMode @ 12, setSleepLatency @ 16,
        sleepLatency @ 20, setSleepDisable @ 24, sleepDisable @ 28, setBusParams @ 32,
        busVoltageCornerMin @ 36, busVoltageCornerTarget @ 40, busVoltageCornerMax @ 44,
        setCoreParams @ 48, coreVoltageCornerMin @ 52, coreVoltageCornerTarget @ 56,
        coreVoltageCornerMax @ 60,
    }
    struct QnnHtpPerfInfrastructure_HmxV2_t, size 20, align 4 {
        hmxPickDefault @ 0, hmxVoltageCornerMin @ 4, hmxVoltageCornerTarget @ 8,
        hmxVoltageCornerMax @ 12, hmxPerfMode @ 16,
    }
    union QnnHtpPerfInfrastructure_PowerConfigUnion_t
        as "QnnHtpPerfInfrastructure_PowerConfig_t.__bindgen_anon_1", size 64, align 4 {
        dcvsV3Config @ 0, rpcControlLatencyConfig @ 0, rpcPollingTimeConfig @ 0,
        hmxTimeoutIntervalUsConfig @ 0, hmxV2Config @ 0, adaptivePollingTimeConfig @ 0,
        ddrPerfModeConfig @ 0,
    }
    struct QnnHtpPerfInfrastructure_PowerConfig_t, size 68, align 4 {
        option @ 0, config as "__bindgen_anon_1" @ 4,
    }
    struct QnnHtpPerfInfrastructure_MemoryConfig_t, size 8, align 4 {
        option @ 0, memGrowSizeConfig as "__bindgen_anon_1.memGrowSizeConfig" @ 4,
    }

    // QnnProfile.h.
    struct QnnProfile_EventData_t, size 24, align 8 {
        type_ as "type" @ 0, unit @ 4, value @ 8, identifier @ 16,
    }
    union Qnn_ScalarValue_t as "Qnn_Scalar_t.__bindgen_anon_1", size 8, align 8 {
        floatValue @ 0, doubleValue @ 0, uint64Value @ 0, int64Value @ 0, uint32Value @ 0,
        int32Value @ 0, uint16Value @ 0, int16Value @ 0, uint8Value @ 0, int8Value @ 0,
        bool8Value @ 0, bfloat16Value @ 0, stringValue @ 0,
    }
    struct Qnn_Scalar_t, size 16, align 8 { dataType @ 0, value as "__bindgen_anon_1" @ 8 }
    struct Qnn_OpaqueObject_t, size 16, align 8 { data @ 0, len @ 8 }
    struct QnnProfile_BackendOpaqueObject_t, size 24, align 8 { opaqueObject @ 0, fileName @ 16 }
    union QnnProfile_ExtendedEventValue_t as "QnnProfile_ExtendedEventDataV1_t.__bindgen_anon_1",
        size 24, align 8 {
        value @ 0, backendOpaqueObject @ 0,
    }
    struct QnnProfile_ExtendedEventDataV1_t, size 48, align 8 {
        type_ as "type" @ 0, unit @ 4, data as "__bindgen_anon_1" @ 8, timestamp @ 32,
        identifier @ 40,
    }
    // C: `union { QnnProfile_ExtendedEventDataV1_t v1; }`, its only member held directly.
    struct QnnProfile_ExtendedEventData_t, size 56, align 8 {
        version @ 0, v1 as "__bindgen_anon_1.v1" @ 8,
    }
    union QnnProfile_ConfigValue_t as "QnnProfile_Config_t.__bindgen_anon_1", size 8, align 8 {
        customConfig @ 0, numMaxEvents @ 0, enableOptrace @ 0,
    }
    struct QnnProfile_Config_t, size 16, align 8 { option @ 0, value as "__bindgen_anon_1" @ 8 }

    struct QnnSystemContext_BinaryInfoV1_t, size 128, align 8 {
        backendId @ 0, buildId @ 8, coreApiVersion @ 16, backendApiVersion @ 28,
        socVersion @ 40, hwInfoBlobVersion @ 48, contextBlobVersion @ 60, hwInfoBlobSize @ 72,
        hwInfoBlob @ 80, contextBlobSize @ 88, numContextTensors @ 96, contextTensors @ 104,
        numGraphs @ 112, graphs @ 120,
    }
    struct QnnSystemContext_BinaryInfoV2_t, size 136, align 8 {
        backendId @ 0, buildId @ 8, coreApiVersion @ 16, backendApiVersion @ 28,
        socVersion @ 40, hwInfoBlobVersion @ 48, contextBlobVersion @ 60, hwInfoBlobSize @ 72,
        hwInfoBlob @ 80, contextBlobSize @ 88, numContextTensors @ 96, contextTensors @ 104,
        numGraphs @ 112, graphs @ 120, platformInfo @ 128,
    }
    struct QnnSystemContext_BinaryInfoV3_t, size 136, align 8 {
        backendId @ 0, buildId @ 8, coreApiVersion @ 16, backendApiVersion @ 28,
        socVersion @ 40, contextBlobVersion @ 48, contextBlobSize @ 64, numContextTensors @ 72,
        contextTensors @ 80, numGraphs @ 88, graphs @ 96, platformInfo @ 104,
        contextMetadataSize @ 112, contextMetadata @ 120, socModel @ 128,
    }
    union QnnSystemContext_BinaryInfoUnion_t as "QnnSystemContext_BinaryInfo_t.__bindgen_anon_1",
        size 136, align 8 {
        contextBinaryInfoV1 @ 0, contextBinaryInfoV2 @ 0, contextBinaryInfoV3 @ 0,
    }
    struct QnnSystemContext_BinaryInfo_t, size 144, align 8 {
        version @ 0, info as "__bindgen_anon_1" @ 8,
    }
    struct QnnSystemContext_GraphInfoV1_t, size 40, align 8 {
        graphName @ 0, numGraphInputs @ 8, graphInputs @ 16, numGraphOutputs @ 24,
        graphOutputs @ 32,
    }
    struct QnnSystemContext_GraphInfoV2_t, size 56, align 8 {
        graphName @ 0, numGraphInputs @ 8, graphInputs @ 16, numGraphOutputs @ 24,
        graphOutputs @ 32, numUpdateableTensors @ 40, updateableTensors @ 48,
    }
    struct QnnSystemContext_GraphInfoV3_t, size 80, align 8 {
        graphName @ 0, numGraphInputs @ 8, graphInputs @ 16, numGraphOutputs @ 24,
        graphOutputs @ 32, numUpdateableTensors @ 40, updateableTensors @ 48,
        graphBlobInfoSize @ 56, graphBlobInfo @ 64, startOpIndex @ 72, endOpIndex @ 76,
    }
    union QnnSystemContext_GraphInfoUnion_t as "QnnSystemContext_GraphInfo_t.__bindgen_anon_1",
        size 80, align 8 {
        graphInfoV1 @ 0, graphInfoV2 @ 0, graphInfoV3 @ 0,
    }
    struct QnnSystemContext_GraphInfo_t, size 88, align 8 {
        version @ 0, info as "__bindgen_anon_1" @ 8,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The number of fields each declared type has, counted independently of the list above
    /// (structs are also proven complete at compile time by the exhaustive patterns; unions
    /// only by this count and the size check below).
    const FIELD_COUNTS: &[(&str, usize)] = &[
        ("Qnn_Version_t", 3),
        ("Qnn_ApiVersion_t", 2),
        ("QnnInterface_ImplementationV2_32_t", 71),
        ("QnnInterface_t", 4),
        ("QnnSystemInterface_ImplementationV1_7_t", 16),
        ("QnnSystemInterface_t", 4),
        ("Qnn_NotifyStatus_t", 1),
        ("Qnn_ErrorReportingConfig_t", 2),
        ("QnnContext_AsyncExecutionQueueDepth_t", 2),
        ("QnnContext_ConfigUnion_t", 11),
        ("QnnContext_Config_t", 2),
        ("Qnn_ScaleOffset_t", 2),
        ("Qnn_AxisScaleOffset_t", 3),
        ("Qnn_BwScaleOffset_t", 3),
        ("Qnn_BwAxisScaleOffset_t", 5),
        ("Qnn_BlockEncoding_t", 2),
        ("Qnn_FloatBlockEncoding_t", 2),
        ("Qnn_BwFloatBlockEncoding_t", 3),
        ("Qnn_QuantizeParamsUnion_t", 8),
        ("Qnn_QuantizeParams_t", 3),
        ("Qnn_ClientBuffer_t", 2),
        ("Qnn_TensorMemory_t", 3),
        ("Qnn_TensorV1_t", 10),
        ("Qnn_SparseLayoutHybridCoo_t", 2),
        ("Qnn_SparseParams_t", 2),
        ("Qnn_TensorV2_t", 13),
        ("Qnn_TensorUnion_t", 2),
        ("Qnn_Tensor_t", 2),
        ("Qnn_MemShape_t", 3),
        ("Qnn_MemIonInfo_t", 1),
        ("Qnn_MemDmaBufInfo_t", 2),
        ("Qnn_MemDescriptorUnion_t", 3),
        ("Qnn_MemDescriptor_t", 4),
        ("QnnDevice_CoreInfoV1_t", 3),
        ("QnnDevice_CoreInfo_t", 2),
        ("QnnDevice_HardwareDeviceInfoV1_t", 5),
        ("QnnDevice_HardwareDeviceInfo_t", 2),
        ("QnnDevice_PlatformInfoV1_t", 2),
        ("QnnDevice_PlatformInfo_t", 2),
        ("QnnHtpDevice_OnChipDeviceInfoExtension_t", 5),
        ("QnnHtpDevice_DeviceInfoExtension_t", 2),
        ("QnnHtpDevice_PerfInfrastructure_t", 4),
        ("QnnHtpDevice_Infrastructure_t", 2),
        ("QnnHtpPerfInfrastructure_DcvsV3_t", 16),
        ("QnnHtpPerfInfrastructure_HmxV2_t", 5),
        ("QnnHtpPerfInfrastructure_PowerConfigUnion_t", 7),
        ("QnnHtpPerfInfrastructure_PowerConfig_t", 2),
        ("QnnHtpPerfInfrastructure_MemoryConfig_t", 2),
        ("QnnProfile_EventData_t", 4),
        ("Qnn_ScalarValue_t", 13),
        ("Qnn_Scalar_t", 2),
        ("Qnn_OpaqueObject_t", 2),
        ("QnnProfile_BackendOpaqueObject_t", 2),
        ("QnnProfile_ExtendedEventValue_t", 2),
        ("QnnProfile_ExtendedEventDataV1_t", 5),
        ("QnnProfile_ExtendedEventData_t", 2),
        ("QnnProfile_ConfigValue_t", 3),
        ("QnnProfile_Config_t", 2),
        ("QnnSystemContext_BinaryInfoV1_t", 14),
        ("QnnSystemContext_BinaryInfoV2_t", 15),
        ("QnnSystemContext_BinaryInfoV3_t", 15),
        ("QnnSystemContext_BinaryInfoUnion_t", 3),
        ("QnnSystemContext_BinaryInfo_t", 2),
        ("QnnSystemContext_GraphInfoV1_t", 5),
        ("QnnSystemContext_GraphInfoV2_t", 7),
        ("QnnSystemContext_GraphInfoV3_t", 11),
        ("QnnSystemContext_GraphInfoUnion_t", 3),
        ("QnnSystemContext_GraphInfo_t", 2),
    ];

    #[test]
    fn every_declared_type_is_listed_with_all_its_fields() {
        assert_eq!(DECLARED.len(), FIELD_COUNTS.len());
        for (layout, &(rust_name, count)) in DECLARED.iter().zip(FIELD_COUNTS) {
            assert_eq!(layout.rust_name, rust_name);
            assert_eq!(layout.fields.len(), count, "{rust_name}: field count");
        }
    }

    /// The listed fields tile the type: in order, no overlap, and any gap (including the tail)
    /// is only the padding the next field's (or the type's) alignment requires. A missing field
    /// leaves a gap wider than padding; for a union, the largest member must fill the size.
    #[test]
    fn listed_fields_cover_each_type() {
        for layout in DECLARED {
            let name = layout.rust_name;
            if layout.is_union {
                assert!(layout.fields.iter().all(|f| f.offset == 0), "{name}");
                let largest = layout.fields.iter().map(|f| f.size).max().unwrap_or(0);
                assert_eq!(
                    largest.next_multiple_of(layout.align),
                    layout.size,
                    "{name}"
                );
                continue;
            }
            let mut end = 0;
            for field in layout.fields {
                assert!(field.offset >= end, "{name}.{}: overlaps", field.rust_name);
                assert!(
                    field.offset - end < layout.align,
                    "{name}.{}: {} unlisted bytes before it",
                    field.rust_name,
                    field.offset - end
                );
                end = field.offset + field.size;
            }
            assert_eq!(
                end.next_multiple_of(layout.align),
                layout.size,
                "{name}: tail"
            );
        }
    }

    #[test]
    fn names_follow_the_c_spelling() {
        for layout in DECLARED {
            let anonymous = layout.name.ends_with(".__bindgen_anon_1");
            assert!(
                anonymous || layout.name == layout.rust_name,
                "{}",
                layout.name
            );
            for field in layout.fields {
                assert!(!field.name.ends_with('_'), "{}.{}", layout.name, field.name);
            }
        }
    }
}
