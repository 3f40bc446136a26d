//! QnnSystem metadata: every BinaryInfo/GraphInfo/tensor version, quantization encodings,
//! the 64-byte GraphInfo stride of System API 1.1, and each adversarial option.

mod common;
mod models;

use common::*;
use qnn_sim::builder::{ConstData, ModelBuilder};
use qnn_sim::model::*;
use qnn_sys::*;

fn two_graphs() -> ModelBuilder {
    models::identity_into(models::classifier(), "second", 3)
}

#[test]
fn default_answer_contents() {
    let sim = Sim::load();
    let bytes = models::classifier().soc_version("sm7325").build().unwrap();
    let m = sim.metadata(&bytes).unwrap();
    assert_eq!(m.version, 3);
    assert_eq!(m.backend_id, QNN_BACKEND_ID_HTP);
    assert!(m.build_id.starts_with("qnn_sim"));
    assert_eq!((m.core_api.major, m.core_api.minor), (2, 32));
    assert_eq!(m.soc_version, "sm7325");
    assert_eq!(m.context_blob_size, bytes.len() as u64);
    assert_eq!(m.num_graphs, 1);
    let g = &m.graphs[0];
    assert_eq!(
        (g.version, g.name.as_deref(), g.end_op_index),
        (3, Some("classifier"), Some(2))
    );
    let x = &g.inputs[0];
    assert_eq!(x.version, 2);
    assert_eq!(x.name.as_deref(), Some(&b"x"[..]));
    assert_eq!(x.id, 1);
    assert_eq!(x.type_, QNN_TENSOR_TYPE_APP_WRITE);
    assert_eq!(x.data_type, QNN_DATATYPE_UFIXED_POINT_8);
    assert_eq!(x.dims.as_deref(), Some(&[1, 4][..]));
    assert_eq!(x.encoding_definition, QNN_DEFINITION_DEFINED);
    assert_eq!(x.encoding, QNN_QUANTIZATION_ENCODING_SCALE_OFFSET);
    assert_eq!(x.scale_offsets, Some((-1, vec![(models::X_SCALE, 0)])));
    let y = &g.outputs[0];
    assert_eq!(
        (y.type_, y.data_type),
        (QNN_TENSOR_TYPE_APP_READ, QNN_DATATYPE_FLOAT_32)
    );
    assert_eq!(
        (y.encoding_definition, y.encoding),
        (
            QNN_DEFINITION_UNDEFINED,
            QNN_QUANTIZATION_ENCODING_UNDEFINED
        )
    );
    assert_eq!(sim.live(), 0, "the System context was freed");
}

#[test]
fn every_version_combination() {
    let sim = Sim::load();
    for bi in 1..=3 {
        for gi in 1..=3 {
            for tv in 1..=2 {
                let bytes = two_graphs().metadata_versions(bi, gi, tv).build().unwrap();
                let m = sim.metadata(&bytes).unwrap();
                assert_eq!(m.version, bi);
                assert_eq!(m.num_graphs, 2);
                assert_eq!(m.context_blob_size, bytes.len() as u64);
                let names: Vec<_> = m.graphs.iter().map(|g| g.name.clone().unwrap()).collect();
                assert_eq!(names, ["classifier", "second"]);
                for g in &m.graphs {
                    assert_eq!(g.version, gi);
                    assert_eq!(g.end_op_index.is_some(), gi == 3);
                    for t in g.inputs.iter().chain(&g.outputs) {
                        assert_eq!(t.version, tv);
                    }
                }
                assert_eq!(m.graphs[1].inputs[0].dims.as_deref(), Some(&[3][..]));
            }
        }
    }
    assert_eq!(sim.live(), 0);
}

#[test]
fn bitwidth_and_per_axis_encodings() {
    let sim = Sim::load();
    let bytes = ModelBuilder::new()
        .graph("g", |g| {
            let a = g.input(
                "a",
                TensorSpec::new(DType::UFixed8, [2])
                    .quant(Quant::per_tensor(0.5, -3).with_bitwidth(4)),
            );
            let b = g.input(
                "b",
                TensorSpec::new(DType::SFixed8, [2, 3]).quant(Quant::per_axis(
                    1,
                    vec![0.1, 0.2, 0.3],
                    vec![0, 1, 2],
                )),
            );
            let c = g.input(
                "c",
                TensorSpec::new(DType::SFixed8, [2])
                    .quant(Quant::per_axis(0, vec![0.5, 0.25], vec![0, 0]).with_bitwidth(4)),
            );
            let k = g.constant("k", TensorSpec::f32([1]), ConstData::values([1.0f32]));
            let y = g.identity("y", k, TensorSpec::f32([1]));
            let _ = (a, b, c);
            g.output(y);
        })
        .build()
        .unwrap();
    let m = sim.metadata(&bytes).unwrap();
    let [a, b, c] = &m.graphs[0].inputs[..] else {
        panic!()
    };
    assert_eq!(
        (a.encoding, a.bitwidth, a.scale_offsets.clone()),
        (
            QNN_QUANTIZATION_ENCODING_BW_SCALE_OFFSET,
            Some(4),
            Some((-1, vec![(0.5, -3)]))
        )
    );
    assert_eq!(b.encoding, QNN_QUANTIZATION_ENCODING_AXIS_SCALE_OFFSET);
    assert_eq!(
        b.scale_offsets,
        Some((1, vec![(0.1, 0), (0.2, 1), (0.3, 2)]))
    );
    assert_eq!(
        (c.encoding, c.bitwidth),
        (QNN_QUANTIZATION_ENCODING_BW_AXIS_SCALE_OFFSET, Some(4))
    );
    assert_eq!(c.scale_offsets, Some((0, vec![(0.5, 0), (0.25, 0)])));
}

#[test]
fn system_api_1_1_lays_graph_info_out_64_bytes_apart() {
    let sim = Sim::load();
    assert_eq!(sim.configure("system_providers", "1.1.0"), 0);
    let p = &sim.system_providers()[0];
    assert_eq!((p.systemApiVersion.major, p.systemApiVersion.minor), (1, 1));
    let bytes = two_graphs().build().unwrap(); // asks for GraphInfo v3: reported as v2
    let (h, info) = sim.metadata_raw(&bytes).unwrap();
    // SAFETY: a live answer of a 1.1 provider: 64-byte stride.
    let m = unsafe { read_binary_meta(info, 64) };
    assert_eq!(
        m.graphs
            .iter()
            .map(|g| (g.version, g.name.clone().unwrap()))
            .collect::<Vec<_>>(),
        [(2, "classifier".to_string()), (2, "second".to_string())]
    );
    assert_eq!(m.graphs[1].inputs[0].dims.as_deref(), Some(&[3][..]));
    assert_eq!(sim.free_system(h), 0);
    assert_eq!(sim.live(), 0);
}

#[test]
fn answers_live_until_the_system_context_is_freed() {
    let sim = Sim::load();
    let t = sim.sys();
    let bytes = models::classifier().build().unwrap();
    let mut h = std::ptr::null_mut();
    let (mut i1, mut i2) = (std::ptr::null(), std::ptr::null());
    let mut size = 0u64;
    // SAFETY: valid out-pointers and buffer; the answers are read before the free.
    unsafe {
        assert_eq!(t.systemContextCreate.unwrap()(&mut h), 0);
        assert_eq!(sim.live(), 1);
        assert_eq!(
            t.systemContextGetMetaData.unwrap()(
                h,
                bytes.as_ptr().cast(),
                bytes.len() as u64,
                &mut i1
            ),
            0
        );
        let mut copy = bytes.clone();
        assert_eq!(
            t.systemContextGetBinaryInfo.unwrap()(
                h,
                copy.as_mut_ptr().cast(),
                copy.len() as u64,
                &mut i2,
                &mut size
            ),
            0
        );
        assert_eq!(size, 144);
        assert_ne!(i1, i2);
        assert_eq!(read_binary_meta(i1, 88), read_binary_meta(i2, 88));
        assert_eq!(
            code(t.systemContextGetMetaData.unwrap()(
                h,
                std::ptr::null(),
                4,
                &mut i1
            )),
            QNN_SYSTEM_COMMON_ERROR_INVALID_ARGUMENT
        );
        assert_eq!(code(t.systemContextFree.unwrap()(h)), 0);
        assert_eq!(
            code(t.systemContextFree.unwrap()(h)),
            QNN_SYSTEM_COMMON_ERROR_INVALID_HANDLE
        );
        assert_eq!(
            code(t.systemContextGetMetaData.unwrap()(
                h,
                bytes.as_ptr().cast(),
                bytes.len() as u64,
                &mut i1
            )),
            QNN_SYSTEM_COMMON_ERROR_INVALID_HANDLE
        );
    }
    assert_eq!(sim.live(), 0);
}

fn adversarial(sim: &Sim, kind: AdversarialKind) -> BinaryMeta {
    let bytes = models::classifier().adversarial(kind).build().unwrap();
    let (h, info) = sim.metadata_raw(&bytes).unwrap();
    // SAFETY: a live answer; the reader bounds what it follows (absurd counts, NULLs).
    let m = unsafe { read_binary_meta(info, 88) };
    assert_eq!(sim.free_system(h), 0);
    // Execution is unaffected by adversarial metadata.
    let s = sim.open();
    let ctx = sim.create_context(&s, &bytes).unwrap();
    assert_eq!(sim.free_context(ctx), 0);
    sim.close(s);
    assert_eq!(sim.live(), 0);
    m
}

#[test]
fn each_adversarial_option_is_reported() {
    use AdversarialKind::*;
    let sim = Sim::load();
    let adversarial = |k| adversarial(&sim, k);
    let x = |m: &BinaryMeta| m.graphs[0].inputs[0].clone();
    assert_eq!(adversarial(NullGraphName).graphs[0].name, None);
    assert_eq!(x(&adversarial(NullTensorName)).name, None);
    assert_eq!(
        x(&adversarial(NonUtf8TensorName)).name.as_deref(),
        Some(&b"bad\xff\xfename"[..])
    );
    assert_eq!(x(&adversarial(ZeroDim)).dims, Some(vec![0, 4]));
    assert_eq!(x(&adversarial(OverflowDims)).dims, Some(vec![u32::MAX; 4]));
    assert_eq!(x(&adversarial(RankAbove8)).dims, Some(vec![1; 9]));
    assert_eq!(x(&adversarial(UnknownDtype)).data_type, 0x0999);
    let t = x(&adversarial(NullDims));
    assert_eq!((t.rank, t.dims), (2, None));
    let t = x(&adversarial(AxisCountMismatch));
    assert_eq!(
        (
            t.encoding,
            t.num_scale_offsets,
            t.scale_offsets.unwrap().1.len()
        ),
        (QNN_QUANTIZATION_ENCODING_AXIS_SCALE_OFFSET, 2, 2)
    );
    let t = x(&adversarial(AxisOutOfRange));
    assert_eq!(t.scale_offsets.unwrap().0, 2);
    assert_eq!(
        x(&adversarial(ScaleZero)).scale_offsets.unwrap().1[0].0,
        0.0
    );
    assert_eq!(
        x(&adversarial(ScaleNegative)).scale_offsets.unwrap().1[0].0,
        -0.5
    );
    assert!(
        x(&adversarial(ScaleNan)).scale_offsets.unwrap().1[0]
            .0
            .is_nan()
    );
    let t = x(&adversarial(NullScaleOffset));
    assert_eq!(
        (t.encoding, t.num_scale_offsets, t.scale_offsets),
        (QNN_QUANTIZATION_ENCODING_AXIS_SCALE_OFFSET, 1, None)
    );
    assert_eq!(adversarial(UnknownBinaryInfoVersion).version, 99);
    assert_eq!(adversarial(UnknownGraphInfoVersion).graphs[0].version, 99);
    assert_eq!(x(&adversarial(UnknownTensorVersion)).version, 99);
    let m = adversarial(AbsurdNumGraphs);
    assert_eq!((m.num_graphs, m.graphs.len()), (1 << 30, 0));
    let m = adversarial(NullGraphs);
    assert!(m.graphs_null && m.num_graphs == 1);
    let g = adversarial(AbsurdNumInputs).graphs[0].clone();
    assert_eq!((g.num_inputs, g.inputs.len()), (1 << 30, 0));
    let g = adversarial(NullInputs).graphs[0].clone();
    assert_eq!((g.num_inputs, g.inputs.len()), (1, 0));
    assert_eq!(adversarial(AbsurdNumOutputs).graphs[0].num_outputs, 1 << 30);
    assert_eq!(adversarial(NullOutputs).graphs[0].outputs.len(), 0);
    assert_eq!(
        x(&adversarial(BlockEncoding)).encoding,
        QNN_QUANTIZATION_ENCODING_BLOCK
    );
}

#[test]
fn adversarial_targets_a_named_tensor() {
    let sim = Sim::load();
    let bytes = models::classifier()
        .adversarial_on(AdversarialKind::ZeroDim, Some("classifier"), Some("probs"))
        .build()
        .unwrap();
    let m = sim.metadata(&bytes).unwrap();
    assert_eq!(m.graphs[0].inputs[0].dims, Some(vec![1, 4]));
    assert_eq!(m.graphs[0].outputs[0].dims, Some(vec![0, 3]));
    assert!(
        models::classifier()
            .adversarial_on(AdversarialKind::ZeroDim, None, Some("nope"))
            .build()
            .is_err()
    );
}
