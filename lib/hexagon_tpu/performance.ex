defmodule HexagonTpu.Performance do
  @moduledoc """
  HTP performance modes: votes on the NPU's power state (clocks, voltage corners, sleep
  latency), through the backend's HTP perf infrastructure (`deviceGetInfrastructure`,
  `createPowerConfigId`, `setPowerConfig`, `destroyPowerConfigId`). Without a vote the DSP
  runs at its default clocks.

  A mode is set per runtime (`HexagonTpu.Runtime.create/1`'s `:performance`, changed later
  with `HexagonTpu.Runtime.set_performance/2`) and per call (`HexagonTpu.predict/3`'s and
  `HexagonTpu.Graph.execute/3`'s `:performance`). A call's mode is voted before its execute
  (by the execute NIF, on the caller's dirty scheduler) and stays voted while calls keep
  coming; once the runtime has been idle (no execute running and none started) for its
  `:performance_idle` delay (default #{300} ms), the runtime's own mode is voted again. A vote is sent only when the mode changes: back-to-back calls with one mode
  cost no vote after the first. When concurrent calls ask for different modes, the latest
  call's mode is voted.

  | mode                          | DCVS  | bus and core corner (min = target = max) | sleep latency | power mode  |
  |-------------------------------|-------|------------------------------------------|---------------|-------------|
  | `:burst`                      | off   | MAX_VOLTAGE_CORNER (0xA0)                | 40 µs         | performance |
  | `:sustained_high_performance` | off   | MAX_VOLTAGE_CORNER (0xA0)                | 40 µs         | performance |
  | `:high_performance`           | off   | TURBO (0x80)                             | 100 µs        | performance |
  | `:balanced`                   | on    | NOM_PLUS (0x70)                          | 1000 µs       | performance |
  | `:low_balanced`               | on    | NOM (0x60)                               | 1000 µs       | performance |
  | `:high_power_saver`           | on    | SVS_PLUS (0x50)                          | 1000 µs       | performance |
  | `:power_saver`                | on    | SVS (0x40)                               | 1000 µs       | performance |
  | `:low_power_saver`            | on    | SVS2 (0x30)                              | 1000 µs       | performance |
  | `:extreme_power_saver`        | on    | CORNER_DISABLE (0x10)                    | 1000 µs       | power saver |
  | `:default`                    | no vote: the DSP's own clocks                                                   |

  These are the DCVS v3 values ONNX Runtime's QNN EP votes (onnxruntime/onnxruntime-qnn,
  `qnn_htp_power_config_manager.cc` and `qnn_def.h`, commit `cee6c0d9`); like ORT, `:burst`
  also sets an RPC polling time of 9999 µs (0 for every other mode, sent only when it
  changes). `:default` withdraws whatever was voted: the runtime's power config id is given
  back and a new one taken, so the DSP is as it was before any vote.

  A vote the backend refuses fails nothing: it is logged once per runtime (a `QNN:` warning,
  through `HexagonTpu.QnnLog`), counted in `HexagonTpu.Stats.native/0` as
  `performance_votes_refused` (`performance_votes` counts every vote sent), and the calls run at
  the clocks they have. A backend without a perf infrastructure (the CPU backend) refuses every
  mode but `:default` that way.

  The parameters of the vote in force are kept with the runtime (`HexagonTpu.Runtime.performance/1`
  shows them): Qualcomm's HTP library replays DCVS v3 votes after a DSP restart, and a recovery
  of ours can send them again.
  """

  alias HexagonTpu.Args

  @modes [
    :burst,
    :sustained_high_performance,
    :high_performance,
    :balanced,
    :low_balanced,
    :power_saver,
    :low_power_saver,
    :high_power_saver,
    :extreme_power_saver,
    :default
  ]

  @typedoc "An HTP performance mode."
  @type mode ::
          :burst
          | :sustained_high_performance
          | :high_performance
          | :balanced
          | :low_balanced
          | :power_saver
          | :low_power_saver
          | :high_power_saver
          | :extreme_power_saver
          | :default

  @doc "Every mode, from the fastest to the default."
  @spec modes() :: [mode()]
  def modes, do: @modes

  @doc false
  # What a :performance option must be, in its schema's messages and docs.
  @spec type_doc() :: String.t()
  def type_doc, do: "one of #{Enum.map_join(@modes, ", ", &inspect/1)}"

  @doc false
  # The :performance option (ArgumentError naming `fun` for anything else).
  @spec mode!(term(), String.t()) :: mode()
  def mode!(mode, _fun) when mode in @modes, do: mode

  def mode!(other, fun), do: Args.type_error!(fun, "the :performance option", type_doc(), other)
end
