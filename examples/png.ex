defmodule HexagonTpu.Examples.PNG do
  @moduledoc """
  A small PNG reader and writer in plain Elixir for the examples (zlib through `:zlib`, chunk
  CRCs through `:erlang.crc32/1`): 8-bit, non-interlaced images, grey, grey + alpha, RGB, RGBA
  or palette, any of the five row filters; read as RGB (grey replicated, a palette looked up,
  alpha dropped, not composited), written as RGB.
  """

  import Bitwise, only: [&&&: 2]

  @signature <<0x89, "PNG\r\n", 0x1A, "\n">>
  # colour type => bytes per pixel at 8 bits
  @channels %{0 => 1, 2 => 3, 3 => 1, 4 => 2, 6 => 4}
  @filters [none: 0, sub: 1, up: 2, average: 3, paeth: 4]

  @doc "Reads a PNG file as `{rgb, width, height}`, or raises naming the file and the problem."
  def read!(path) do
    case decode(File.read!(path)) do
      {:ok, image} -> image
      {:error, message} -> raise ArgumentError, "#{path}: #{message}"
    end
  end

  @doc "Writes `{rgb, width, height}` (3 bytes a pixel, rows packed) as a PNG file."
  def write!(path, rgb, width, height, opts \\ []),
    do: File.write!(path, encode(rgb, width, height, opts))

  @doc "`{:ok, {rgb, width, height}}` of a PNG's bytes, or `{:error, message}`."
  def decode(<<@signature, chunks::binary>>) do
    with {:ok, header, palette, idat} <- chunks(chunks, nil, nil, []),
         {:ok, width, height, color} <- header(header),
         bpp = @channels[color],
         {:ok, raw} <- inflate(idat),
         :ok <- raw_size(raw, width, height, bpp),
         {:ok, pixels} <- unfilter(raw, width * bpp, bpp) do
      to_rgb(pixels, color, palette, width, height)
    end
  end

  def decode(_), do: {:error, "not a PNG (no PNG signature)"}

  @doc """
  A PNG of `rgb` (`width * height * 3` bytes). Option `:filter`: `:none`, `:sub`, `:up`
  (default), `:average`, `:paeth`, or `:cycle` (row `y` takes filter `rem(y, 5)`, to exercise a
  reader's five filters).
  """
  def encode(rgb, width, height, opts \\ []) do
    row = width * 3

    unless is_binary(rgb) and byte_size(rgb) == row * height and width > 0 and height > 0,
      do: raise(ArgumentError, "PNG.encode: #{width}x#{height} RGB needs #{row * height} bytes")

    filter = Keyword.get(opts, :filter, :up)

    rows =
      for y <- 0..(height - 1) do
        line = binary_part(rgb, y * row, row)
        prev = if y == 0, do: :binary.copy(<<0>>, row), else: binary_part(rgb, (y - 1) * row, row)
        kind = if filter == :cycle, do: rem(y, 5), else: Keyword.fetch!(@filters, filter)
        [kind | filter_row(kind, line, prev, 3)]
      end

    ihdr = <<width::32, height::32, 8, 2, 0, 0, 0>>

    IO.iodata_to_binary([
      @signature,
      chunk("IHDR", ihdr),
      chunk("IDAT", :zlib.compress(rows)),
      chunk("IEND", "")
    ])
  end

  # -- reading ---------------------------------------------------------------------------------

  defp chunks(<<length::32, type::binary-4, rest::binary>>, header, palette, idat)
       when byte_size(rest) >= length + 4 do
    <<data::binary-size(length), crc::32, rest::binary>> = rest

    cond do
      :erlang.crc32([type, data]) != crc -> {:error, "chunk #{inspect(type)}: bad CRC"}
      type == "IHDR" -> chunks(rest, data, palette, idat)
      type == "PLTE" -> chunks(rest, header, data, idat)
      type == "IDAT" -> chunks(rest, header, palette, [idat | data])
      type == "IEND" and header == nil -> {:error, "no IHDR chunk"}
      type == "IEND" -> {:ok, header, palette, idat}
      true -> chunks(rest, header, palette, idat)
    end
  end

  defp chunks(_, _, _, _), do: {:error, "truncated (no IEND chunk)"}

  defp header(<<w::32, h::32, 8, color, 0, 0, 0>>)
       when w > 0 and h > 0 and is_map_key(@channels, color),
       do: {:ok, w, h, color}

  defp header(<<_::64, depth, color, _, _, interlace>>) do
    {:error,
     "#{depth}-bit, colour type #{color}#{if interlace == 1, do: ", interlaced", else: ""}: " <>
       "this reader takes 8-bit, non-interlaced grey, RGB, palette, grey-alpha or RGBA"}
  end

  defp header(_), do: {:error, "IHDR is not 13 bytes"}

  defp inflate(idat) do
    {:ok, :zlib.uncompress(idat)}
  rescue
    ErlangError -> {:error, "IDAT is not a valid zlib stream"}
  end

  defp raw_size(raw, w, h, bpp) do
    want = h * (1 + w * bpp)

    if byte_size(raw) == want,
      do: :ok,
      else: {:error, "#{byte_size(raw)} bytes of image data, #{w}x#{h} needs #{want}"}
  end

  # Each row: its filter byte, then the filtered bytes; undone against the previous row's
  # unfiltered bytes (zeros above the first row).
  defp unfilter(raw, row, bpp) do
    zero = :binary.copy(<<0>>, row)

    result =
      Enum.reduce_while(0..(div(byte_size(raw), row + 1) - 1), {zero, []}, fn y, {prev, acc} ->
        <<kind, line::binary-size(row)>> = binary_part(raw, y * (row + 1), row + 1)

        if kind in 0..4 do
          out = unfilter_row(kind, line, prev, bpp)
          {:cont, {out, [acc | out]}}
        else
          {:halt, {:error, "row #{y}: unknown filter type #{kind}"}}
        end
      end)

    case result do
      {:error, _} = error -> error
      {_, acc} -> {:ok, IO.iodata_to_binary(acc)}
    end
  end

  defp unfilter_row(0, line, _prev, _bpp), do: line

  defp unfilter_row(2, line, prev, _bpp),
    do:
      for(
        {x, b} <- Enum.zip(:binary.bin_to_list(line), :binary.bin_to_list(prev)),
        into: <<>>,
        do: <<x + b>>
      )

  # Sub, Average, Paeth: a (left) and c (up-left) are the bytes bpp back, zero at the start
  defp unfilter_row(kind, line, prev, bpp) do
    pad = :binary.copy(<<0>>, bpp)
    unfilter_bytes(kind, line, prev, pad, pad, [])
  end

  defp unfilter_bytes(_kind, <<>>, _prev, _left, _upleft, acc),
    do: acc |> Enum.reverse() |> :erlang.list_to_binary()

  defp unfilter_bytes(kind, <<x, line::binary>>, <<b, prev::binary>>, left, upleft, acc) do
    <<a, left_rest::binary>> = left
    <<c, upleft_rest::binary>> = upleft
    v = x + predict(kind, a, b, c) &&& 0xFF

    unfilter_bytes(kind, line, prev, <<left_rest::binary, v>>, <<upleft_rest::binary, b>>, [
      v | acc
    ])
  end

  defp predict(1, a, _b, _c), do: a
  defp predict(3, a, b, _c), do: div(a + b, 2)
  defp predict(4, a, b, c), do: paeth(a, b, c)

  defp paeth(a, b, c) do
    p = a + b - c
    {pa, pb, pc} = {abs(p - a), abs(p - b), abs(p - c)}

    cond do
      pa <= pb and pa <= pc -> a
      pb <= pc -> b
      true -> c
    end
  end

  defp to_rgb(pixels, 2, _palette, w, h), do: {:ok, {pixels, w, h}}

  defp to_rgb(pixels, 6, _palette, w, h),
    do: {:ok, {for(<<r, g, b, _a <- pixels>>, into: <<>>, do: <<r, g, b>>), w, h}}

  defp to_rgb(pixels, 0, _palette, w, h),
    do: {:ok, {for(<<v <- pixels>>, into: <<>>, do: <<v, v, v>>), w, h}}

  defp to_rgb(pixels, 4, _palette, w, h),
    do: {:ok, {for(<<v, _a <- pixels>>, into: <<>>, do: <<v, v, v>>), w, h}}

  defp to_rgb(_pixels, 3, nil, _w, _h), do: {:error, "a palette PNG without a PLTE chunk"}

  defp to_rgb(pixels, 3, palette, w, h) do
    entries = for <<rgb::binary-3 <- palette>>, do: rgb
    table = List.to_tuple(entries)
    n = tuple_size(table)

    if Enum.all?(:binary.bin_to_list(pixels), &(&1 < n)),
      do: {:ok, {for(<<i <- pixels>>, into: <<>>, do: elem(table, i)), w, h}},
      else: {:error, "a pixel indexes past the palette's #{n} entries"}
  end

  # -- writing ---------------------------------------------------------------------------------

  defp chunk(type, data),
    do: [<<byte_size(data)::32>>, type, data, <<:erlang.crc32([type, data])::32>>]

  defp filter_row(0, line, _prev, _bpp), do: line

  defp filter_row(kind, line, prev, bpp) do
    pad = :binary.copy(<<0>>, bpp)
    # a and c: the unfiltered bytes bpp back in this row and the previous one
    left = <<pad::binary, binary_part(line, 0, byte_size(line) - bpp)::binary>>
    upleft = <<pad::binary, binary_part(prev, 0, byte_size(prev) - bpp)::binary>>

    for {x, a, b, c} <- zip4(line, left, prev, upleft), into: <<>> do
      pred = if kind == 2, do: b, else: predict(kind, a, b, c)
      <<x - pred &&& 0xFF>>
    end
  end

  defp zip4(a, b, c, d) do
    Enum.zip([
      :binary.bin_to_list(a),
      :binary.bin_to_list(b),
      :binary.bin_to_list(c),
      :binary.bin_to_list(d)
    ])
  end
end
