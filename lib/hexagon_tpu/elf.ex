defmodule HexagonTpu.Elf do
  @moduledoc """
  What a shared library's bytes say about it, read in Elixir without opening it as a library:
  its ELF machine, the C library it was built for (glibc or Android's bionic), and the QAIRT
  build id QNN writes into its libraries and context binaries. `HexagonTpu.diagnose/1` uses it.

  Only regular files are read (a symlink is followed to one; a directory, device or FIFO is
  refused), and every read is bounded: the header and program headers, the dynamic section
  (at most #{div(64 * 1024, 1024)} KiB) and its string table (at most 1 MiB); `build_id/2`
  reads at most `:max_bytes` (default 512 MiB), 4 MiB at a time.
  """

  @typedoc "The ELF `e_machine`, named where this package cares about it."
  @type machine :: :x86_64 | :aarch64 | :hexagon | :arm | :x86 | {:other, non_neg_integer()}

  @typedoc """
  The C library a file was linked for: `:glibc` (needs `libc.so.6` or its loader), `:android`
  (bionic: `libc.so`, `liblog.so`, `libc++_shared.so` or `/system/bin/linker*`), `:musl`, or
  `:unknown` (no dynamic section or none of those, as for a DSP skeleton).
  """
  @type variant :: :glibc | :android | :musl | :unknown

  @type t :: %{
          class: 32 | 64,
          machine: machine(),
          variant: variant(),
          needed: [String.t()],
          interpreter: String.t() | nil
        }

  @max_phnum 256
  @max_dynamic 64 * 1024
  @max_strtab 1024 * 1024
  @max_build_id_bytes 512 * 1024 * 1024

  # The QAIRT build id ("v2.51.0.260929181845"), as priv/compile/hexagon_tpu_runtime.py's
  # BUILD_ID reads it (the Python copy serves the install script and CI, which run without a VM).
  @build_id ~r/v([1-9][0-9]?)\.([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{6,14})(?![0-9])/

  @doc "The readable name of a machine (`\"aarch64\"`, `\"x86-64\"`, `\"Hexagon\"`, ...)."
  @spec machine_name(machine()) :: String.t()
  def machine_name(:x86_64), do: "x86-64"
  def machine_name(:aarch64), do: "aarch64"
  def machine_name(:hexagon), do: "Hexagon"
  def machine_name(:arm), do: "32-bit ARM"
  def machine_name(:x86), do: "32-bit x86"
  def machine_name({:other, n}), do: "ELF machine #{n}"

  @doc """
  The ELF machine of `path`, from its first 20 bytes alone (either class; the machine field read little-endian, as
  every target of this package is): what
  `HexagonTpu.Compiler` checks an SDK's `libQnnHtp.so` with.

  Returns `{:error, message}` (one line) for a file that is missing, not regular or not ELF.
  """
  @spec machine(Path.t()) :: {:ok, machine()} | {:error, String.t()}
  def machine(path) do
    with_regular_file(path, fn file, size ->
      case pread(file, 0, min(size, 20)) do
        {:ok, <<0x7F, "ELF", _::binary-size(14), m::little-16>>} -> {:ok, e_machine(m)}
        {:ok, _} -> {:error, "not an ELF file"}
        {:error, _} = error -> error
      end
    end)
  end

  @doc """
  Reads the ELF header, program headers and dynamic section of `path`.

  Returns `{:error, message}` (one line) for a file that is missing, not regular, not ELF, or
  whose headers point outside it.
  """
  @spec read(Path.t()) :: {:ok, t()} | {:error, String.t()}
  def read(path) do
    with_regular_file(path, fn file, size ->
      with {:ok, header} <- pread(file, 0, min(size, 64)),
           {:ok, class, machine, phoff, phentsize, phnum} <- header(header),
           {:ok, phdrs} <- program_headers(file, size, class, phoff, phentsize, phnum),
           {:ok, interpreter} <- interpreter(file, phdrs),
           {:ok, needed} <- needed(file, class, phdrs) do
        {:ok,
         %{
           class: class,
           machine: machine,
           variant: variant(needed, interpreter),
           needed: needed,
           interpreter: interpreter
         }}
      end
    end)
  end

  @doc """
  The QAIRT build id in a file's bytes, `{:ok, nil}` when it has none.

  QNN writes it into its libraries (`libQnnHtp.so`, the stubs and skels; not
  `libQnnSystem.so`) and into every context binary it serializes. A file with two different
  ids is an error. Options: `:max_bytes` (default 512 MiB; a larger file is refused).
  """
  @spec build_id(Path.t(), keyword()) :: {:ok, String.t() | nil} | {:error, String.t()}
  def build_id(path, opts \\ []) do
    max = Keyword.get(opts, :max_bytes, @max_build_id_bytes)

    with_regular_file(path, fn file, size ->
      if size > max do
        {:error, "#{path} is #{size} bytes, more than the #{max} read for a build id"}
      else
        with {:ok, ids} <- scan_build_ids(file, 0, size, "", MapSet.new()) do
          case Enum.sort(ids) do
            [] -> {:ok, nil}
            [id] -> {:ok, id}
            ids -> {:error, "#{path} holds several QAIRT build ids: #{Enum.join(ids, ", ")}"}
          end
        end
      end
    end)
  end

  @chunk 4 * 1024 * 1024

  # Reads the file in chunks, each scanned with the last 64 bytes of the one before (an id is
  # at most 26 bytes); a match ending in the last 32 bytes of a chunk waits for the next one,
  # unless the file ends there.
  defp scan_build_ids(file, offset, size, tail, ids) do
    length = min(@chunk, size - offset)

    with {:ok, chunk} <- pread(file, offset, length) do
      buffer = tail <> chunk
      last? = offset + length >= size
      limit = if last?, do: byte_size(buffer), else: byte_size(buffer) - 32

      ids =
        for [{start, len}] <- Regex.scan(@build_id, buffer, return: :index, capture: :first),
            start + len <= limit,
            into: ids,
            do: binary_part(buffer, start, len)

      if last?,
        do: {:ok, ids},
        else:
          scan_build_ids(
            file,
            offset + length,
            size,
            binary_part(buffer, byte_size(buffer) - 64, 64),
            ids
          )
    end
  end

  # Opens `path` only if it is (a symlink to) a regular file, so a FIFO or device is never
  # opened (opening a FIFO blocks).
  defp with_regular_file(path, fun) do
    case File.stat(path) do
      {:ok, %File.Stat{type: :regular, size: size}} ->
        case :file.open(path, [:read, :raw, :binary]) do
          {:ok, file} ->
            try do
              fun.(file, size)
            after
              :file.close(file)
            end

          {:error, reason} ->
            {:error, "cannot open #{path}: #{:file.format_error(reason)}"}
        end

      {:ok, %File.Stat{type: type}} ->
        {:error, "#{path} is a #{type}, not a regular file"}

      {:error, :enoent} ->
        case File.lstat(path) do
          {:ok, %File.Stat{type: :symlink}} -> {:error, "#{path} is a dangling symlink"}
          _ -> {:error, "#{path} does not exist"}
        end

      {:error, reason} ->
        {:error, "cannot read #{path}: #{:file.format_error(reason)}"}
    end
  end

  defp pread(_file, _offset, 0), do: {:ok, ""}

  defp pread(file, offset, length) do
    case :file.pread(file, offset, length) do
      {:ok, bytes} when byte_size(bytes) == length -> {:ok, bytes}
      {:ok, _} -> {:error, "the file ends before its headers say"}
      :eof -> {:error, "the file ends before its headers say"}
      {:error, reason} -> {:error, "read failed: #{:file.format_error(reason)}"}
    end
  end

  defp header(
         <<0x7F, "ELF", class, 1, _::binary-size(10), _type::little-16, m::little-16, _::binary>> =
           h
       ) do
    case class do
      2 ->
        <<_::binary-32, phoff::little-64, _::binary-14, phentsize::little-16, phnum::little-16,
          _::binary>> = h

        {:ok, 64, e_machine(m), phoff, phentsize, phnum}

      1 ->
        <<_::binary-28, phoff::little-32, _::binary-10, phentsize::little-16, phnum::little-16,
          _::binary>> = h

        {:ok, 32, e_machine(m), phoff, phentsize, phnum}

      _ ->
        {:error, "unknown ELF class #{class}"}
    end
  end

  defp header(<<0x7F, "ELF", _class, 2, _::binary>>), do: {:error, "a big-endian ELF file"}
  defp header(_), do: {:error, "not an ELF file"}

  defp e_machine(62), do: :x86_64
  defp e_machine(183), do: :aarch64
  defp e_machine(164), do: :hexagon
  defp e_machine(40), do: :arm
  defp e_machine(3), do: :x86
  defp e_machine(n), do: {:other, n}

  defp program_headers(_file, _size, _class, _phoff, _phentsize, 0), do: {:ok, []}

  defp program_headers(file, size, class, phoff, phentsize, phnum) do
    min = if class == 64, do: 56, else: 32

    cond do
      phnum > @max_phnum -> {:error, "#{phnum} program headers"}
      phentsize < min -> {:error, "program header size #{phentsize}"}
      phoff + phnum * phentsize > size -> {:error, "program headers outside the file"}
      true -> read_program_headers(file, class, phoff, phentsize, phnum)
    end
  end

  defp read_program_headers(file, class, phoff, phentsize, phnum) do
    with {:ok, bytes} <- pread(file, phoff, phnum * phentsize) do
      {:ok,
       for <<entry::binary-size(phentsize) <- bytes>> do
         case {class, entry} do
           {64,
            <<type::little-32, _flags::little-32, offset::little-64, vaddr::little-64,
              _paddr::little-64, filesz::little-64, _::binary>>} ->
             %{type: type, offset: offset, vaddr: vaddr, filesz: filesz}

           {32,
            <<type::little-32, offset::little-32, vaddr::little-32, _paddr::little-32,
              filesz::little-32, _::binary>>} ->
             %{type: type, offset: offset, vaddr: vaddr, filesz: filesz}
         end
       end}
    end
  end

  @pt_load 1
  @pt_dynamic 2
  @pt_interp 3

  defp interpreter(file, phdrs) do
    case Enum.find(phdrs, &(&1.type == @pt_interp)) do
      nil ->
        {:ok, nil}

      %{offset: offset, filesz: filesz} when filesz <= 4096 ->
        with {:ok, bytes} <- pread(file, offset, filesz), do: {:ok, c_string(bytes, 0)}

      _ ->
        {:error, "an interpreter path longer than 4096 bytes"}
    end
  end

  @dt_needed 1
  @dt_strtab 5
  @dt_strsz 10

  defp needed(file, class, phdrs) do
    case Enum.find(phdrs, &(&1.type == @pt_dynamic)) do
      nil ->
        {:ok, []}

      %{offset: offset, filesz: filesz} ->
        with {:ok, bytes} <- pread(file, offset, min(filesz, @max_dynamic)) do
          entries = dynamic_entries(bytes, class)
          strtab = for {@dt_strtab, value} <- entries, do: value
          strsz = for {@dt_strsz, value} <- entries, do: value
          offsets = for {@dt_needed, value} <- entries, do: value
          needed_names(file, phdrs, strtab, strsz, offsets)
        end
    end
  end

  defp needed_names(_file, _phdrs, _strtab, _strsz, []), do: {:ok, []}

  defp needed_names(file, phdrs, [strtab | _], [strsz | _], offsets) when strsz <= @max_strtab do
    load =
      Enum.find(phdrs, fn p ->
        p.type == @pt_load and strtab >= p.vaddr and strtab < p.vaddr + p.filesz
      end)

    if load do
      with {:ok, table} <- pread(file, strtab - load.vaddr + load.offset, strsz) do
        {:ok, for(offset <- offsets, offset < strsz, do: c_string(table, offset))}
      end
    else
      {:error, "the dynamic string table lies outside every loaded segment"}
    end
  end

  defp needed_names(_file, _phdrs, _strtab, _strsz, _offsets),
    do: {:error, "a dynamic section without a usable string table"}

  defp dynamic_entries(bytes, 64) do
    Enum.reduce_while(
      for(<<tag::little-64, value::little-64 <- bytes>>, do: {tag, value}),
      [],
      &dt/2
    )
    |> Enum.reverse()
  end

  defp dynamic_entries(bytes, 32) do
    Enum.reduce_while(
      for(<<tag::little-32, value::little-32 <- bytes>>, do: {tag, value}),
      [],
      &dt/2
    )
    |> Enum.reverse()
  end

  defp dt({0, _}, acc), do: {:halt, acc}
  defp dt(entry, acc), do: {:cont, [entry | acc]}

  defp c_string(bytes, offset) do
    rest = binary_part(bytes, offset, byte_size(bytes) - offset)
    [string | _] = :binary.split(rest, <<0>>)
    string
  end

  @android_needed ["libc.so", "liblog.so", "libc++_shared.so", "libandroid.so"]

  defp variant(needed, interpreter) do
    cond do
      "libc.so.6" in needed or match?("/lib/ld-linux" <> _, interpreter) or
          match?("/lib64/ld-linux" <> _, interpreter) ->
        :glibc

      Enum.any?(needed, &(&1 in @android_needed)) or
          match?("/system/bin/linker" <> _, interpreter) ->
        :android

      Enum.any?(needed, &String.starts_with?(&1, "libc.musl")) or
          match?("/lib/ld-musl" <> _, interpreter) ->
        :musl

      true ->
        :unknown
    end
  end
end
