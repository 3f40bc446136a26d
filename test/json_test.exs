defmodule HexagonTpu.JSONTest do
  use ExUnit.Case, async: true

  alias HexagonTpu.JSON

  test "encode writes sorted keys, escapes, and refuses what JSON cannot hold" do
    assert JSON.encode(%{b: [1, 2.5, nil], a: "q\"\\\n\u00e9", c: true, d: :burst}) ==
             ~S({"a":"q\"\\\u000Aé","b":[1,2.5,null],"c":true,"d":"burst"})

    assert_raise ArgumentError, ~r/cannot encode as JSON: \{1, 2\}/, fn -> JSON.encode({1, 2}) end
    assert_raise ArgumentError, ~r/not UTF-8/, fn -> JSON.encode(<<255>>) end
    assert_raise ArgumentError, ~r/as a JSON key: 1/, fn -> JSON.encode(%{1 => 2}) end
  end

  test "decode reads what encode writes, and is strict" do
    term = %{"a" => [1, -2.5e-3, 1.0e5, nil, true, false], "b" => %{"c" => "é\t/"}}
    assert JSON.decode(JSON.encode(term)) == {:ok, term}
    assert JSON.decode(~S( {"x": 1e5, "y": "\u00e9\/"} )) == {:ok, %{"x" => 1.0e5, "y" => "é/"}}

    for {text, message} <- [
          {"[1,]", "invalid JSON at byte 3: a value expected"},
          {~S({"a":1,}), "invalid JSON at byte 7: a string key expected"},
          {"01", "invalid JSON at byte 1: trailing data"},
          {"\"a\nb\"", "invalid JSON at byte 2: a bad character in a string"},
          {~S("\ud800"), "invalid JSON at byte 1: a \\u escape of a character expected"},
          {~S("abc), "invalid JSON at byte 4: an unterminated string"},
          {"1e400", "invalid JSON at byte 0: a number a float can hold expected"}
        ] do
      assert JSON.decode(text) == {:error, message}
      assert_raise ArgumentError, message, fn -> JSON.decode!(text) end
    end
  end
end
