defmodule HexagonTpu.NifNotLoadedHexTest do
  # test/nif_not_loaded_test.exs for the Hex paths, with the real rustler_precompiled 0.8 and
  # rustler (their sources in HEXAGON_TPU_HEX_SOURCES, ../shared/hex in CI; tagged :hex_sources,
  # run by .ci/elixir-1.18.sh: rustler 0.38 needs Elixir 1.15). A throwaway Mix project in a
  # temp dir depends on a copy of this package (lib/ and mix.exs, its GitHub URL pointed at an
  # :inets server on 127.0.0.1) and on those sources by path, with a Hex archive built from
  # them and HEX_OFFLINE=1. Each test compiles hexagon_tpu there and runs the child VM of
  # test/support/nif_child.ex on the result:
  #
  #   * RustlerPrecompiled's download of an artifact whose library is garbage (checksum right),
  #     then with that library deleted after the build;
  #   * a download that fails, or whose checksum does not match: RustlerPrecompiled raises at
  #     compile time (a build error, before anything can boot);
  #   * the forced build (HEXAGON_TPU_BUILD=1) through Rustler's on_load, its library garbage,
  #     then missing. This root filesystem has no Rust toolchain, so the project sets Rustler's
  #     own `skip_compilation?: true`: Rustler skips cargo and loads what priv/native holds.
  use ExUnit.Case, async: false

  alias HexagonTpu.Test.NifChild

  @moduletag :hex_sources
  @moduletag timeout: 600_000

  @version Mix.Project.config()[:version]

  setup_all do
    sources = System.fetch_env!("HEXAGON_TPU_HEX_SOURCES")
    dir = Path.join(System.tmp_dir!(), "hexagon_tpu_hex_#{System.unique_integer([:positive])}")
    on_exit(fn -> File.rm_rf!(dir) end)

    www = Path.join(dir, "www")
    File.mkdir_p!(www)
    :ok = Application.ensure_started(:inets)

    {:ok, httpd} =
      :inets.start(:httpd,
        port: 0,
        server_name: ~c"nif_probe",
        server_root: to_charlist(dir),
        document_root: to_charlist(www),
        bind_address: {127, 0, 0, 1}
      )

    on_exit(fn -> :inets.stop(:httpd, httpd) end)
    [port: port] = :httpd.info(httpd, [:port])

    # The package as Hex users get it (the parts the Elixir side needs), its release URL local.
    pkg = Path.join(dir, "hexagon_tpu")
    File.mkdir_p!(pkg)
    File.cp_r!("lib", Path.join(pkg, "lib"))

    mix_exs =
      String.replace(
        File.read!("mix.exs"),
        ~r/@source_url "[^"]*"/,
        ~s(@source_url "http://127.0.0.1:#{port}/hexagon_tpu")
      )

    File.write!(Path.join(pkg, "mix.exs"), mix_exs)

    app = Path.join(dir, "nif_probe")
    File.mkdir_p!(Path.join(app, "config"))
    File.write!(Path.join(app, "mix.exs"), probe_mix_exs(sources))

    File.write!(Path.join(app, "config/config.exs"), """
    import Config

    if System.get_env("PROBE_SKIP_CARGO") == "1",
      do: config(:hexagon_tpu, HexagonTpu.Native, skip_compilation?: true)
    """)

    cache = Path.join(dir, "rustler_precompiled_cache")

    env = [
      {"MIX_ENV", "prod"},
      {"MIX_HOME", Path.join(dir, "mix_home")},
      {"HEX_HOME", Path.join(dir, "hex_home")},
      {"HEX_OFFLINE", "1"},
      {"RUSTLER_PRECOMPILED_GLOBAL_CACHE_PATH", cache},
      # Not this suite's settings.
      {"MIX_BUILD_ROOT", nil},
      {"MIX_BUILD_PATH", nil},
      {"MIX_DEPS_PATH", nil},
      {"HEXAGON_TPU_OFFLINE", nil},
      {"HEXAGON_TPU_HEX_SOURCES", nil},
      {"HEXAGON_TPU_NIF_BASE_URL", nil},
      {"HEXAGON_TPU_BUILD", nil},
      {"RUSTLER_PRECOMPILED_FORCE_BUILD_ALL", nil}
      | for(var <- ~w(HTTP_PROXY http_proxy HTTPS_PROXY https_proxy), do: {var, nil})
    ]

    # Mix needs Hex even when every dependency is a path one (README of the sources).
    hex = Path.join(dir, "hex")
    File.cp_r!(Path.join(sources, "hex"), hex)
    ez = Path.join(dir, "hex.ez")
    mix!(hex, ~w(archive.build -o #{ez}), env)
    mix!(dir, ~w(archive.install #{ez} --force), env)

    mix!(
      app,
      ~w(deps.compile castore jason nimble_options rustler rustler_precompiled telemetry),
      env
    )

    %{app: app, pkg: pkg, www: www, cache: cache, env: env}
  end

  defp probe_mix_exs(sources) do
    deps =
      for name <- ~w(nimble_options rustler_precompiled castore rustler jason telemetry),
          do: "{:#{name}, path: #{inspect(Path.join(sources, name))}, override: true}"

    """
    defmodule NifProbe.MixProject do
      use Mix.Project

      def project do
        [app: :nif_probe, version: "0.1.0", deps: [{:hexagon_tpu, path: "../hexagon_tpu"}, #{Enum.join(deps, ", ")}]]
      end
    end
    """
  end

  defp mix(dir, args, env) do
    System.cmd(System.find_executable("mix"), args, cd: dir, env: env, stderr_to_stdout: true)
  end

  defp mix!(dir, args, env) do
    {output, status} = mix(dir, args, env)
    assert status == 0, "mix #{Enum.join(args, " ")} in #{dir}: status #{status}\n#{output}"
    output
  end

  # Compiles hexagon_tpu in the probe project: {output, exit status}.
  defp compile(ctx, env \\ []) do
    File.rm_rf!(ctx.cache)
    mix(ctx.app, ~w(deps.compile hexagon_tpu --force), ctx.env ++ env)
  end

  defp ebins(ctx), do: Path.wildcard(Path.join(ctx.app, "_build/prod/lib/*/ebin"))
  defp native_dir(ctx), do: Path.join(ctx.app, "_build/prod/lib/hexagon_tpu/priv/native")

  defp target do
    arch = :erlang.system_info(:system_architecture) |> to_string() |> String.split("-") |> hd()
    "#{arch}-unknown-linux-gnu"
  end

  defp lib_name, do: "libhexagon_tpu_nif-v#{@version}-nif-2.15-#{target()}.so"

  # Serves an artifact holding `library` as the library, and writes the package's checksum
  # file with `checksum` (the artifact's own unless given).
  defp publish(ctx, library, checksum \\ nil) do
    dir = Path.join(ctx.www, "hexagon_tpu/releases/download/v#{@version}")
    File.mkdir_p!(dir)
    tarball = Path.join(dir, lib_name() <> ".tar.gz")

    :ok =
      :erl_tar.create(to_charlist(tarball), [{to_charlist(lib_name()), library}], [:compressed])

    sum = checksum || Base.encode16(:crypto.hash(:sha256, File.read!(tarball)), case: :lower)

    File.write!(
      Path.join(ctx.pkg, "checksum-Elixir.HexagonTpu.Native.exs"),
      ~s(%{"#{lib_name()}.tar.gz" => "sha256:#{sum}"}\n)
    )
  end

  defp unpublish(ctx), do: File.rm_rf!(Path.join(ctx.www, "hexagon_tpu"))

  @garbage String.duplicate("not a shared object\n", 1000)

  test "RustlerPrecompiled's download: a garbage library, then none", ctx do
    publish(ctx, @garbage)
    {output, status} = compile(ctx)
    assert status == 0, output
    refute output =~ "warning", output

    lib = Path.join(native_dir(ctx), lib_name())
    assert File.read!(lib) == @garbage
    NifChild.assert_not_loaded(ebins(ctx), lib, "invalid ELF header")

    File.rm!(lib)
    NifChild.assert_not_loaded(ebins(ctx), lib, "cannot open shared object file")
  end

  test "RustlerPrecompiled's download fails: a compile-time error, not a boot failure", ctx do
    publish(ctx, @garbage)
    unpublish(ctx)
    {output, status} = compile(ctx)
    assert status != 0, output
    assert output =~ "Error while downloading precompiled NIF", output
    assert output =~ "couldn't fetch NIF from http://127.0.0.1:", output
  end

  test "RustlerPrecompiled's checksum does not match: a compile-time error", ctx do
    publish(ctx, @garbage, String.duplicate("0", 64))
    {output, status} = compile(ctx)
    assert status != 0, output
    assert output =~ "Error while downloading precompiled NIF", output
    assert output =~ "the integrity check failed", output
  end

  test "a forced build (HEXAGON_TPU_BUILD=1) through Rustler's on_load: garbage, then none",
       ctx do
    unpublish(ctx)
    {output, status} = compile(ctx, [{"HEXAGON_TPU_BUILD", "1"}, {"PROBE_SKIP_CARGO", "1"}])
    assert status == 0, output
    refute output =~ "warning", output

    # Where a forced build puts the library (Rustler's load_from default).
    lib = Path.join(native_dir(ctx), "hexagon_tpu_nif.so")
    File.mkdir_p!(Path.dirname(lib))
    File.write!(lib, @garbage)
    NifChild.assert_not_loaded(ebins(ctx), lib, "invalid ELF header")

    File.rm!(lib)
    NifChild.assert_not_loaded(ebins(ctx), lib, "cannot open shared object file")
  end
end
