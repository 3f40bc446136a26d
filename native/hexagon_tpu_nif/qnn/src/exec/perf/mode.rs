//! What a vote asks for: the performance modes and their DCVS values, and the vote in force.

use std::time::Duration;

use crate::sys;

/// How long a call's mode stays voted after the last call that asked for it ended: 300 ms, the
/// release timer onnxruntime-qnn's sustained high performance mode uses (its PR #38). Calls
/// closer together than this cost no vote; a runtime idle for longer goes back to its own mode.
pub const DEFAULT_IDLE: Duration = Duration::from_millis(300);

/// The HTP performance modes, with the DCVS v3 values ONNX Runtime's QNN EP votes for each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PerfMode {
    Burst,
    SustainedHighPerformance,
    HighPerformance,
    Balanced,
    LowBalanced,
    PowerSaver,
    LowPowerSaver,
    HighPowerSaver,
    ExtremePowerSaver,
    /// No vote: the DSP's own default clocks.
    Default,
}

impl PerfMode {
    /// Every mode, in the order the documentation lists them.
    pub const ALL: [PerfMode; 10] = [
        PerfMode::Burst,
        PerfMode::SustainedHighPerformance,
        PerfMode::HighPerformance,
        PerfMode::Balanced,
        PerfMode::LowBalanced,
        PerfMode::PowerSaver,
        PerfMode::LowPowerSaver,
        PerfMode::HighPowerSaver,
        PerfMode::ExtremePowerSaver,
        PerfMode::Default,
    ];

    /// The name users give (`"burst"`, ..., `"default"`), ORT's `htp_performance_mode` spelling.
    pub fn name(self) -> &'static str {
        match self {
            PerfMode::Burst => "burst",
            PerfMode::SustainedHighPerformance => "sustained_high_performance",
            PerfMode::HighPerformance => "high_performance",
            PerfMode::Balanced => "balanced",
            PerfMode::LowBalanced => "low_balanced",
            PerfMode::PowerSaver => "power_saver",
            PerfMode::LowPowerSaver => "low_power_saver",
            PerfMode::HighPowerSaver => "high_power_saver",
            PerfMode::ExtremePowerSaver => "extreme_power_saver",
            PerfMode::Default => "default",
        }
    }

    /// The mode named `name`, if any.
    pub fn from_name(name: &str) -> Option<PerfMode> {
        PerfMode::ALL.into_iter().find(|m| m.name() == name)
    }

    pub(super) fn index(self) -> u8 {
        PerfMode::ALL.iter().position(|&m| m == self).unwrap_or(9) as u8
    }

    pub(super) fn from_index(index: u8) -> Option<PerfMode> {
        PerfMode::ALL.get(usize::from(index)).copied()
    }

    /// The DCVS v3 config voted for this mode, with `power_config_id` as its `contextId`, or
    /// `None` for [`PerfMode::Default`], which votes nothing.
    ///
    /// The values are ONNX Runtime's: `HtpPowerConfigManager::SetHtpPerformancePowerConfig` in
    /// onnxruntime/core/providers/qnn/builder/qnn_htp_power_config_manager.cc, with the sleep
    /// latencies of onnxruntime/core/providers/qnn/builder/qnn_def.h (`kSleepMinLatency` 40,
    /// `kSleepLowLatency` 100, `kSleepMediumLatency` 1000 µs), in onnxruntime/onnxruntime-qnn
    /// at commit cee6c0d91e583d43f5ecef6391e93c19b4042c0f. ORT has no values for its default
    /// mode (it never votes it; that function refuses it).
    pub fn dcvs_v3(self, power_config_id: u32) -> Option<sys::QnnHtpPerfInfrastructure_DcvsV3_t> {
        use sys::*;
        // (sleep latency µs, dcvsEnable, power mode, the one corner for bus and core)
        let (sleep_latency, dcvs_enable, power_mode, corner) = match self {
            PerfMode::Burst | PerfMode::SustainedHighPerformance => (
                40,
                0,
                QNN_HTP_PERF_INFRASTRUCTURE_POWERMODE_PERFORMANCE_MODE,
                DCVS_VOLTAGE_VCORNER_MAX_VOLTAGE_CORNER,
            ),
            PerfMode::HighPerformance => (
                100,
                0,
                QNN_HTP_PERF_INFRASTRUCTURE_POWERMODE_PERFORMANCE_MODE,
                DCVS_VOLTAGE_VCORNER_TURBO,
            ),
            PerfMode::Balanced => (
                1000,
                1,
                QNN_HTP_PERF_INFRASTRUCTURE_POWERMODE_PERFORMANCE_MODE,
                DCVS_VOLTAGE_VCORNER_NOM_PLUS,
            ),
            PerfMode::LowBalanced => (
                1000,
                1,
                QNN_HTP_PERF_INFRASTRUCTURE_POWERMODE_PERFORMANCE_MODE,
                DCVS_VOLTAGE_VCORNER_NOM,
            ),
            PerfMode::HighPowerSaver => (
                1000,
                1,
                QNN_HTP_PERF_INFRASTRUCTURE_POWERMODE_PERFORMANCE_MODE,
                DCVS_VOLTAGE_VCORNER_SVS_PLUS,
            ),
            PerfMode::PowerSaver => (
                1000,
                1,
                QNN_HTP_PERF_INFRASTRUCTURE_POWERMODE_PERFORMANCE_MODE,
                DCVS_VOLTAGE_VCORNER_SVS,
            ),
            PerfMode::LowPowerSaver => (
                1000,
                1,
                QNN_HTP_PERF_INFRASTRUCTURE_POWERMODE_PERFORMANCE_MODE,
                DCVS_VOLTAGE_VCORNER_SVS2,
            ),
            PerfMode::ExtremePowerSaver => (
                1000,
                1,
                QNN_HTP_PERF_INFRASTRUCTURE_POWERMODE_POWER_SAVER_MODE,
                DCVS_VOLTAGE_CORNER_DISABLE,
            ),
            PerfMode::Default => return None,
        };
        Some(QnnHtpPerfInfrastructure_DcvsV3_t {
            contextId: power_config_id,
            setDcvsEnable: 1,
            dcvsEnable: dcvs_enable,
            powerMode: power_mode,
            setSleepLatency: 1,
            sleepLatency: sleep_latency,
            setSleepDisable: 0,
            sleepDisable: 0,
            setBusParams: 1,
            busVoltageCornerMin: corner,
            busVoltageCornerTarget: corner,
            busVoltageCornerMax: corner,
            setCoreParams: 1,
            coreVoltageCornerMin: corner,
            coreVoltageCornerTarget: corner,
            coreVoltageCornerMax: corner,
        })
    }

    /// The RPC polling time ORT sets with this mode, in µs: 9999 (the most the headers allow)
    /// for burst, 0 (no polling) otherwise (qnn_execution_provider.cc, same commit). It is sent
    /// only when it changes. ORT sends an RPC control latency only when its user sets one; so
    /// does nothing here.
    pub fn rpc_polling_time(self) -> u32 {
        match self {
            PerfMode::Burst => sys::QNN_HTP_PERF_INFRASTRUCTURE_POWER_CONFIG_MAX_RPC_POLLING_TIME,
            _ => 0,
        }
    }
}

/// The parameters of the vote in force on a runtime: what a recovery replays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Vote {
    pub mode: PerfMode,
    /// The DCVS v3 config sent.
    pub dcvs_v3: sys::QnnHtpPerfInfrastructure_DcvsV3_t,
    /// The RPC polling time in force (µs; 0: none).
    pub rpc_polling_time: u32,
}

/// A runtime's performance state, as `Voter::state` reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PerfState {
    /// The runtime's own mode.
    pub mode: PerfMode,
    /// The mode last voted (accepted or refused); [`PerfMode::Default`] before any.
    pub voted: PerfMode,
    /// The vote in force, when the backend accepted one and it was not withdrawn.
    pub last_vote: Option<Vote>,
    /// Whether the backend has a perf infrastructure and gave this runtime a power config id.
    pub available: bool,
}
