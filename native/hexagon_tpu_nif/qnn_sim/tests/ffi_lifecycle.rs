//! Entry points through a fresh library copy: lifecycle, metadata, execute, handles.

mod common;
mod models;

use common::*;
use models::*;

#[test]
fn classifier_round_trip_and_handles_return_to_zero() {
    let sim = Sim::load();
    assert_eq!(sim.live(), 0);
    let bytes = classifier().build().unwrap();
    let s = sim.open();
    assert_eq!(sim.live(), 3);
    let ctx = sim.create_context(&s, &bytes).unwrap();
    let g = sim.retrieve(ctx, "classifier").unwrap();
    assert_eq!(sim.live(), 4);
    for x in [[0u8, 0, 0, 0], [255, 128, 3, 77], [10, 200, 90, 255]] {
        let out = sim.execute(&bytes, g, "classifier", &[&x]).unwrap();
        let got = f32_from(&out[0]);
        let want = classifier_reference(&x);
        for (a, b) in got.iter().zip(&want) {
            assert!((*a as f64 - b).abs() < 1e-6, "{got:?} vs {want:?}");
        }
    }
    assert_eq!(sim.free_context(ctx), 0);
    sim.close(s);
    assert_eq!(sim.live(), 0);
    assert_eq!(sim.executes(), 3);
    assert_eq!(sim.overlaps(), 0);
}

use std::ffi::c_void;
use std::ptr;

use qnn_sys::*;

#[test]
fn stale_double_freed_and_wrong_kind_handles() {
    let sim = Sim::load();
    let t = sim.core();
    let s = sim.open();
    let bytes = identity_f32("g", 2).build().unwrap();
    let ctx = sim.create_context(&s, &bytes).unwrap();
    let g = sim.retrieve(ctx, "g").unwrap();
    assert_eq!(
        sim.retrieve(ctx, "g").unwrap(),
        g,
        "same handle for the same graph"
    );
    assert_eq!(
        sim.retrieve(ctx, "nope").unwrap_err(),
        QNN_GRAPH_ERROR_GRAPH_DOES_NOT_EXIST
    );
    // SAFETY: handle values only; the library looks them up.
    unsafe {
        // Wrong kinds.
        assert_eq!(
            code(t.contextFree.unwrap()(s.backend, ptr::null_mut())),
            QNN_CONTEXT_ERROR_INVALID_HANDLE
        );
        assert_eq!(
            code(t.backendFree.unwrap()(ctx)),
            QNN_BACKEND_ERROR_INVALID_HANDLE
        );
        assert_eq!(
            code(t.deviceFree.unwrap()(s.log)),
            QNN_DEVICE_ERROR_INVALID_HANDLE
        );
        assert_eq!(
            code(t.logFree.unwrap()(s.device)),
            QNN_LOG_ERROR_INVALID_HANDLE
        );
        assert_eq!(
            code(t.logSetLogLevel.unwrap()(s.log, QNN_LOG_LEVEL_DEBUG)),
            0
        );
        assert_eq!(
            code(t.logSetLogLevel.unwrap()(s.log, 77)),
            QNN_LOG_ERROR_INVALID_ARGUMENT
        );
        assert_eq!(
            code(t.graphExecute.unwrap()(
                ctx,
                ptr::null(),
                0,
                ptr::null_mut(),
                0,
                ptr::null_mut(),
                ptr::null_mut()
            )),
            QNN_GRAPH_ERROR_INVALID_HANDLE
        );
        assert_eq!(
            code(t.deviceFree.unwrap()(ptr::null_mut())),
            QNN_DEVICE_ERROR_INVALID_HANDLE
        );
        assert_eq!(
            code(t.deviceFree.unwrap()(0xdead_beef as *mut c_void)),
            QNN_DEVICE_ERROR_INVALID_HANDLE
        );
    }
    assert_eq!(sim.free_context(ctx), 0);
    // Stale: the context and its graph are gone.
    assert_eq!(sim.free_context(ctx), QNN_CONTEXT_ERROR_INVALID_HANDLE);
    assert_eq!(
        sim.retrieve(ctx, "g").unwrap_err(),
        QNN_GRAPH_ERROR_INVALID_CONTEXT
    );
    assert_eq!(
        sim.execute(&bytes, g, "g", &[&[0; 8]]).unwrap_err(),
        QNN_GRAPH_ERROR_INVALID_HANDLE
    );
    let (b, l) = (s.backend, s.log);
    sim.close(s);
    // SAFETY: handle values only.
    unsafe {
        assert_eq!(
            code(t.backendFree.unwrap()(b)),
            QNN_BACKEND_ERROR_INVALID_HANDLE
        );
        assert_eq!(code(t.logFree.unwrap()(l)), QNN_LOG_ERROR_INVALID_HANDLE);
    }
    assert_eq!(sim.live(), 0);
}

#[test]
fn frees_out_of_order_are_refused_and_counted() {
    let sim = Sim::load();
    let t = sim.core();
    let s = sim.open();
    let bytes = identity_f32("g", 2).build().unwrap();
    let ctx = sim.create_context(&s, &bytes).unwrap();
    // SAFETY: handle values only.
    unsafe {
        assert_eq!(
            code(t.backendFree.unwrap()(s.backend)),
            QNN_COMMON_ERROR_OPERATION_NOT_PERMITTED
        );
        assert_eq!(
            code(t.deviceFree.unwrap()(s.device)),
            QNN_COMMON_ERROR_OPERATION_NOT_PERMITTED
        );
        assert_eq!(
            code(t.logFree.unwrap()(s.log)),
            QNN_COMMON_ERROR_OPERATION_NOT_PERMITTED
        );
    }
    assert_eq!(sim.violations(), 3);
    assert_eq!(sim.free_context(ctx), 0);
    sim.close(s);
    assert_eq!(sim.live(), 0);
}

#[test]
fn execute_validates_tensors() {
    let sim = Sim::load();
    let s = sim.open();
    let bytes = classifier().build().unwrap();
    let ctx = sim.create_context(&s, &bytes).unwrap();
    let g = sim.retrieve(ctx, "classifier").unwrap();
    let (h, info) = sim.metadata_raw(&bytes).unwrap();
    let x = [1u8, 2, 3, 4];
    let run = |tamper: &dyn Fn(&mut Vec<Qnn_Tensor_t>, &mut Vec<Qnn_Tensor_t>)| {
        sim.execute_with_info(info, g, "classifier", &[&x], |i, o| tamper(i, o))
    };
    assert!(run(&|_, _| {}).is_ok());
    let bad = QNN_GRAPH_ERROR_INVALID_TENSOR;
    assert_eq!(run(&|i, _| i.clear()).unwrap_err(), bad, "missing input");
    assert_eq!(run(&|_, o| o.clear()).unwrap_err(), bad, "missing output");
    assert_eq!(run(&|i, _| i.push(i[0])).unwrap_err(), bad, "extra input");
    assert_eq!(
        run(&|i, _| { i[0].tensor.v1.id = 999 }).unwrap_err(),
        bad,
        "unknown id"
    );
    assert_eq!(
        run(&|i, _| { i[0].tensor.v1.name = c"other".as_ptr() }).unwrap_err(),
        bad,
        "name"
    );
    assert!(
        run(&|i, _| { i[0].tensor.v1.name = ptr::null() }).is_ok(),
        "NULL name is allowed"
    );
    assert_eq!(
        run(&|i, _| { i[0].tensor.v1.dataType = QNN_DATATYPE_UINT_8 }).unwrap_err(),
        bad,
        "dtype"
    );
    assert_eq!(
        run(&|i, _| { i[0].tensor.v1.rank = 1 }).unwrap_err(),
        bad,
        "rank"
    );
    static DIMS: [u32; 2] = [4, 1];
    assert_eq!(
        run(&|i, _| { i[0].tensor.v1.dimensions = DIMS.as_ptr() as *mut u32 }).unwrap_err(),
        bad,
        "dims"
    );
    assert_eq!(
        run(&|i, _| { i[0].tensor.v1.dimensions = ptr::null_mut() }).unwrap_err(),
        bad,
        "NULL dims"
    );
    assert_eq!(
        run(&|i, _| { i[0].tensor.v1.memType = QNN_TENSORMEMTYPE_MEMHANDLE }).unwrap_err(),
        bad,
        "memType"
    );
    assert_eq!(
        run(&|i, _| { i[0].tensor.v1.memory.clientBuf.dataSize = 3 }).unwrap_err(),
        bad,
        "size"
    );
    assert_eq!(
        run(&|_, o| { o[0].tensor.v1.memory.clientBuf.dataSize = 13 }).unwrap_err(),
        bad,
        "out size"
    );
    assert_eq!(
        run(&|_, o| { o[0].tensor.v1.memory.clientBuf.data = ptr::null_mut() }).unwrap_err(),
        bad,
        "NULL data"
    );
    assert_eq!(
        run(&|i, _| i[0].version = 7).unwrap_err(),
        bad,
        "tensor version"
    );
    assert!(
        run(&|i, _| i[0].version = QNN_TENSOR_VERSION_1).is_ok(),
        "v1 tensors are accepted"
    );
    assert_eq!(sim.free_system(h), 0);
    assert_eq!(sim.free_context(ctx), 0);
    sim.close(s);
    assert_eq!(sim.live(), 0);
}

#[test]
fn overlapping_executes_on_one_graph_are_detected() {
    let sim = Sim::load();
    let s = sim.open();
    let bytes = identity_f32("g", 2).sleep_ms(50).build().unwrap();
    let ctx = sim.create_context(&s, &bytes).unwrap();
    let g = sim.retrieve(ctx, "g").unwrap() as usize;
    let x = f32_bytes(&[1.0, 2.0]);
    let results: Vec<Result<Vec<Vec<u8>>, u32>> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..3)
            .map(|_| sc.spawn(|| sim.execute(&bytes, g as *mut c_void, "g", &[&x])))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let failed = results
        .iter()
        .filter(|r| **r == Err(QNN_GRAPH_ERROR_INVALID_ARGUMENT))
        .count() as u64;
    assert!(failed >= 1, "{results:?}");
    assert_eq!(sim.overlaps(), failed);
    assert_eq!(sim.free_context(ctx), 0);
    sim.close(s);
    assert_eq!(sim.live(), 0);
}

#[test]
fn different_graphs_run_in_parallel_and_context_free_during_execute_is_refused() {
    let sim = Sim::load();
    let s = sim.open();
    let bytes = identity_into(identity_f32("a", 2), "b", 2).build().unwrap();
    let ctx = sim.create_context(&s, &bytes).unwrap();
    let a = sim.retrieve(ctx, "a").unwrap() as usize;
    let b = sim.retrieve(ctx, "b").unwrap() as usize;
    let x = f32_bytes(&[1.0, 2.0]);
    // Both executes held inside the backend until released: decided by ordering, not time.
    assert_eq!(sim.configure("execute_paused", "1"), 0);
    std::thread::scope(|sc| {
        let ha = sc.spawn(|| sim.execute(&bytes, a as *mut c_void, "a", &[&x]));
        let hb = sc.spawn(|| sim.execute(&bytes, b as *mut c_void, "b", &[&x]));
        while sim.peak() < 2 {
            assert!(
                !ha.is_finished() && !hb.is_finished(),
                "an execute returned while executes were paused"
            );
            std::thread::yield_now();
        }
        assert_eq!(
            sim.free_context(ctx),
            QNN_COMMON_ERROR_OPERATION_NOT_PERMITTED
        );
        assert_eq!(sim.configure("execute_paused", "0"), 0);
        assert_eq!(ha.join().unwrap().unwrap()[0], x);
        assert_eq!(hb.join().unwrap().unwrap()[0], x);
    });
    assert_eq!(sim.peak(), 2);
    assert_eq!(sim.overlaps(), 0);
    assert_eq!(sim.violations(), 1);
    assert_eq!(sim.free_context(ctx), 0);
    sim.close(s);
    assert_eq!(sim.live(), 0);
}

#[test]
fn errors_carry_high_bits_and_messages() {
    let sim = Sim::load();
    let t = sim.core();
    // SAFETY: a bogus handle value.
    let rc = unsafe { t.backendFree.unwrap()(ptr::null_mut()) };
    assert_eq!(
        rc,
        0x1_0000_0000 | u64::from(QNN_BACKEND_ERROR_INVALID_HANDLE)
    );
    assert!(
        sim.error_message(rc)
            .contains("QNN_BACKEND_ERROR_INVALID_HANDLE")
    );
    assert!(sim.error_message(12345).contains("unknown"));
    assert_eq!(sim.configure("error_high_bits", "0"), 0);
    // SAFETY: a bogus handle value.
    let rc = unsafe { t.backendFree.unwrap()(ptr::null_mut()) };
    assert_eq!(rc, u64::from(QNN_BACKEND_ERROR_INVALID_HANDLE));
    // SAFETY: a value-only call.
    let rc = unsafe { t.propertyHasCapability.unwrap()(1) };
    assert_eq!(code(rc), QNN_COMMON_ERROR_NOT_SUPPORTED);
}

#[test]
fn api_version_and_build_id() {
    let sim = Sim::load();
    let t = sim.core();
    let mut v = Qnn_ApiVersion_t::default();
    let mut id: *const std::ffi::c_char = ptr::null();
    // SAFETY: valid out-pointers.
    unsafe {
        assert_eq!(t.backendGetApiVersion.unwrap()(&mut v), 0);
        assert_eq!(t.backendGetBuildId.unwrap()(&mut id), 0);
        assert!(
            std::ffi::CStr::from_ptr(id)
                .to_str()
                .unwrap()
                .starts_with("qnn_sim")
        );
    }
    assert_eq!((v.coreApiVersion.major, v.coreApiVersion.minor), (2, 32));
    assert_eq!(
        (v.backendApiVersion.major, v.backendApiVersion.minor),
        (5, 43)
    );
}
