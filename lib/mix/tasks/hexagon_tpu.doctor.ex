defmodule Mix.Tasks.HexagonTpu.Doctor do
  @shortdoc "Checks whether models can run on the NPU here, and says what to fix"

  @moduledoc """
  Runs the doctor (`HexagonTpu.diagnose/1`) and prints one line per check: `✓` ok, `!` a
  warning, `✗` an error, each not-ok one followed by its remedy. Exits with status 1 when any
  check is an error.

      mix hexagon_tpu.doctor [--root DIR] [--lib-path PATH] [--system-lib PATH]
                             [--htp-arch N] [--dsp-library-path PATHS] [--machine aarch64|x86_64]
                             [--timeout MS] [--no-device-creation]

  `--root` checks another root filesystem, such as the rootfs overlay that
  `mix hexagon_tpu.runtime --into DIR` wrote: the libraries and the DSP path are looked up under
  it (with `--machine aarch64` for a board's libraries on a PC). The other options are those
  of `HexagonTpu.diagnose/1`. On a board, run `HexagonTpu.diagnose/1` from IEx.
  """

  use Mix.Task

  @switches [
    root: :string,
    lib_path: :string,
    system_lib: :string,
    htp_arch: :integer,
    dsp_library_path: :string,
    machine: :string,
    timeout: :integer,
    device_creation: :boolean
  ]

  @impl Mix.Task
  def run(argv) do
    {opts, args, invalid} = OptionParser.parse(argv, strict: @switches)

    if invalid != [] or args != [] do
      Mix.raise(
        "usage: mix hexagon_tpu.doctor [--root DIR] [--lib-path PATH] [--system-lib PATH] " <>
          "[--htp-arch N] [--dsp-library-path PATHS] [--machine aarch64|x86_64] [--timeout MS] " <>
          "[--no-device-creation]"
      )
    end

    Mix.Task.run("app.config")
    {:ok, _} = Application.ensure_all_started(:hexagon_tpu)

    opts =
      Enum.map(opts, fn
        {:system_lib, path} -> {:system_lib_path, path}
        {:machine, "aarch64"} -> {:machine, :aarch64}
        {:machine, "x86_64"} -> {:machine, :x86_64}
        {:machine, other} -> Mix.raise("--machine: expected aarch64 or x86_64, got #{other}")
        other -> other
      end)

    checks = HexagonTpu.diagnose(opts)
    Mix.shell().info(HexagonTpu.Diagnosis.format(checks))
    errors = Enum.count(checks, &(&1.status == :error))

    if errors > 0 do
      Mix.shell().error("#{errors} of #{length(checks)} checks failed")
      exit({:shutdown, 1})
    end
  end
end
