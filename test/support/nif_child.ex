defmodule HexagonTpu.Test.NifChild do
  @moduledoc false
  # Runs test/support/nif_not_loaded_child.exs in a child VM on the given code paths, whose
  # hexagon_tpu has a NIF that cannot load, and checks what it printed: the module loaded, the
  # application started (QnnLog logged why), availability/1 named `path` and the loader's
  # reason, every public call returned the same error, and the VM exited with status 0.

  import ExUnit.Assertions

  @script Path.expand("nif_not_loaded_child.exs", __DIR__)

  @doc "Runs the child; returns its output after the checks. `env` as for System.cmd/3."
  def assert_not_loaded(ebins, path, reason_text, env \\ []) do
    {output, status} =
      System.cmd(
        System.find_executable("elixir"),
        Enum.flat_map(ebins, &["-pa", &1]) ++ [@script],
        stderr_to_stdout: true,
        env: env
      )

    assert status == 0, "the child VM exited with status #{status}:\n#{output}"

    for line <- ["CHILD module loaded", "CHILD application started", "CHILD done"],
        do: assert(output =~ line, output)

    assert [_, message] = Regex.run(~r/^CHILD availability: (.*)$/m, output), output
    assert message =~ "the hexagon_tpu NIF did not load from #{path}: ", output
    assert message =~ reason_text, output
    assert output =~ "[warning] hexagon_tpu: #{message}", output
    assert output =~ "CHILD HexagonTpu.predict/3: nif_not_loaded", output
    output
  end
end
