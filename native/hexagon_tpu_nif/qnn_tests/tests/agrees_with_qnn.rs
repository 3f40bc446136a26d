//! qnn_sim is an independent oracle: it depends on `qnn_sys` alone (Cargo enforces it) and writes its own copies of the
//! few facts a backend and its client must share. This is where the copies are held against
//! the runtime's: dtype names and widths, value ranges, the rank limit and the scale check.

use qnn::{DataType, Quantization};
use qnn_sim::builder::ModelBuilder;
use qnn_sim::model::{DType, MAX_RANK, Quant, TensorSpec};

#[test]
fn every_dtype_has_the_runtimes_name_width_and_signedness() {
    for dtype in DType::ALL {
        let runtime = DataType::from_raw(dtype.code())
            .unwrap_or_else(|| panic!("qnn does not know {dtype:?} (0x{:04x})", dtype.code()));
        assert_eq!(dtype.name(), runtime.name(), "{dtype:?}");
        assert_eq!(dtype.bits(), runtime.bits(), "{dtype:?}");
        assert_eq!(
            dtype.is_fixed_point(),
            runtime.is_fixed_point(),
            "{dtype:?}"
        );
        if !dtype.is_float() {
            assert_eq!(dtype.is_signed_int(), runtime.is_signed(), "{dtype:?}");
        }
    }
}

#[test]
fn value_ranges_agree_with_and_without_a_narrower_bit_width() {
    for dtype in DType::ALL.into_iter().filter(|d| !d.is_float()) {
        let runtime = DataType::from_raw(dtype.code()).unwrap();
        assert_eq!(
            dtype.int_range(None),
            Quantization::None.value_range(runtime),
            "{dtype:?}"
        );
        if dtype.is_fixed_point() {
            for bits in [4, 8] {
                let narrowed = Quantization::PerTensor {
                    scale: 1.0,
                    offset: 0,
                    bitwidth: Some(bits),
                };
                assert_eq!(
                    dtype.int_range(Some(bits)),
                    narrowed.value_range(runtime),
                    "{dtype:?} at {bits} bits"
                );
            }
        }
    }
}

#[test]
fn the_rank_limit_is_the_runtimes() {
    assert_eq!(MAX_RANK as u32, qnn::tensor::MAX_RANK);
}

#[test]
fn the_builder_refuses_exactly_the_scales_the_runtime_refuses() {
    for scale in [
        1.0,
        1e-30,
        f32::MIN_POSITIVE,
        f32::MAX,
        0.0,
        -0.0,
        -0.5,
        f32::NAN,
        f32::INFINITY,
    ] {
        let spec = TensorSpec::new(DType::UFixed8, [4]).quant(Quant::per_tensor(scale, 0));
        let built = ModelBuilder::new()
            .graph("g", |g| {
                let x = g.input("x", spec.clone());
                let y = g.identity("y", x, spec.clone());
                g.output(y);
            })
            .build();
        assert_eq!(
            built.is_ok(),
            qnn::tensor::valid_scale(scale),
            "scale {scale}: qnn_sim {}, qnn {}",
            built.is_ok(),
            qnn::tensor::valid_scale(scale)
        );
    }
}
