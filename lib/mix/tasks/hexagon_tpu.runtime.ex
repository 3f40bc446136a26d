defmodule Mix.Tasks.HexagonTpu.Runtime do
  @shortdoc "Installs the device's QNN runtime (same QAIRT as the compile task) into a rootfs overlay"

  @moduledoc """
  Installs Qualcomm's QNN runtime for the board into a Nerves `rootfs_overlay`, from the
  aarch64 wheel of the same pinned `onnxruntime-qnn` that `mix hexagon_tpu.compile` uses, so
  that the binaries the compile task makes load on the device by construction.

      mix hexagon_tpu.runtime --into rootfs_overlay
      mix hexagon_tpu.runtime --into rootfs_overlay --htp-arch 68 --htp-arch 73

  It writes `usr/lib/libQnnHtp.so`, `usr/lib/libQnnSystem.so`, `usr/lib/libQnnHtpV68Stub.so`,
  `usr/lib/dsp/libQnnHtpV68Skel.so` and Qualcomm's license
  (`usr/share/doc/qairt/Qualcomm_LICENSE.pdf`) under the directory, after checking the wheel
  against the sha256 pinned in `priv/compile/requirements.txt`, and prints the files and the
  runtime's build id. The wheel is downloaded once into the cache folder (see
  `HexagonTpu.Compiler`). See `HexagonTpu.DeviceRuntime`.

  The libraries are Qualcomm's, under the license inside the wheel: whoever puts them into a
  firmware image does so under that license. This package never ships them.

  ## Options

    * `--into DIR` - the overlay directory (required; created if missing)
    * `--htp-arch N` - the HTP architecture whose stub and skel to install (default 68, the
      QCS6490's); repeat it for several

  Errors are printed as one line and the task exits with status 1.
  """

  use Mix.Task

  alias HexagonTpu.DeviceRuntime

  @switches [into: :string, htp_arch: :keep]

  @impl Mix.Task
  def run(argv) do
    case OptionParser.parse(argv, strict: @switches) do
      {opts, [], []} ->
        into = opts[:into] || fail("no directory given: mix hexagon_tpu.runtime --into DIR")
        archs = for {:htp_arch, arch} <- opts, do: integer!(arch)
        archs = if archs == [], do: [68], else: archs

        case DeviceRuntime.install(into, htp_arch: archs, progress: &progress/1) do
          {:ok, info} ->
            for file <- info.files, do: Mix.shell().info(Path.join(info.into, file))
            Mix.shell().info("QAIRT build id #{info.build_id} (#{info.wheel})")

          {:error, message} ->
            fail(message)
        end

      {_, [extra | _], []} ->
        fail("unexpected argument #{extra} (see `mix help hexagon_tpu.runtime`)")

      {_, _, [{switch, nil} | _]} ->
        fail("unknown option #{switch} (see `mix help hexagon_tpu.runtime`)")

      {_, _, [{switch, value} | _]} ->
        fail("invalid value #{inspect(value)} for #{switch}")
    end
  end

  defp integer!(text) do
    case Integer.parse(text) do
      {n, ""} when n > 0 -> n
      _ -> fail("invalid value #{inspect(text)} for --htp-arch: expected a positive integer")
    end
  end

  defp progress(message), do: IO.puts(:stderr, "==> " <> message)

  defp fail(message) do
    Mix.shell().error("mix hexagon_tpu.runtime: " <> message)
    exit({:shutdown, 1})
  end
end
