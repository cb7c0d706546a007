// The text helpers (libprof/text): every escape of every form, byte for byte.
#include "text/text.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace std::string_literals;
using prof::text::JsonForm;

namespace text = prof::text;

TEST_CASE("printable writes control bytes and DEL as \\xNN and keeps everything else") {
    CHECK(text::printable("") == "");
    CHECK(text::printable("main") == "main");
    CHECK(text::printable("a\nb\tc\rd") == "a\\x0ab\\x09c\\x0dd");
    CHECK(text::printable("\x1b[31mred"s) == "\\x1b[31mred");
    CHECK(text::printable("\0x"s) == "\\x00x");
    CHECK(text::printable("\x7f\x1f") == "\\x7f\\x1f");
    // UTF-8 and other high bytes pass, as do quotes and backslashes.
    CHECK(text::printable("Grüße \xe2\x82\xac \xff") == "Grüße \xe2\x82\xac \xff");
    CHECK(text::printable("\"a\\b\"") == "\"a\\b\"");
    std::string long_name(100000, 'x');
    long_name[50000] = '\n';
    std::string shown = text::printable(long_name);
    CHECK(shown.size() == 100003);
    CHECK(shown.substr(49999, 6) == "x\\x0ax");
}

TEST_CASE("json_escape in the renderers' form escapes markup too") {
    CHECK(text::json_escape("") == "");
    CHECK(text::json_escape("std::vector<int>::operator&") ==
          "std::vector\\u003cint\\u003e::operator\\u0026");
    CHECK(text::json_escape("\"q\" \\ \n \t \r") == "\\\"q\\\" \\\\ \\n \\t \\r");
    CHECK(text::json_escape("\x01\x1f\x7f\0"s) == "\\u0001\\u001f\\u007f\\u0000");
    CHECK(text::json_escape("</script>") == "\\u003c/script\\u003e");
    CHECK(text::json_escape("é \xe2\x82\xac") == "é \xe2\x82\xac");
    CHECK(text::json_escape("x", JsonForm::kEmbeddable) == text::json_escape("x"));
}

TEST_CASE("json_escape in the tools' form keeps markup") {
    CHECK(text::json_escape("a<b>&c", JsonForm::kPlain) == "a<b>&c");
    CHECK(text::json_escape("\"\\\n\t\r", JsonForm::kPlain) == "\\\"\\\\\\n\\t\\r");
    CHECK(text::json_escape("\x02\x7f", JsonForm::kPlain) == "\\u0002\\u007f");
    CHECK(text::json_escape("", JsonForm::kPlain) == "");
}

TEST_CASE("json_escape in the manifest's form writes \\r as \\u000d and keeps DEL") {
    CHECK(text::json_escape("a\rb", JsonForm::kManifest) == "a\\u000db");
    CHECK(text::json_escape("\x7f", JsonForm::kManifest) == "\x7f");
    CHECK(text::json_escape("<&>", JsonForm::kManifest) == "<&>");
    CHECK(text::json_escape("\"\\\n\t\x03", JsonForm::kManifest) == "\\\"\\\\\\n\\t\\u0003");
}

TEST_CASE("json_quoted adds the quotes around the escaped body") {
    CHECK(text::json_quoted("") == "\"\"");
    CHECK(text::json_quoted("a\"b") == "\"a\\\"b\"");
    CHECK(text::json_quoted("a\rb", JsonForm::kManifest) == "\"a\\u000db\"");
    CHECK(text::json_quoted("<", JsonForm::kPlain) == "\"<\"");
    CHECK(text::json_quoted("<") == "\"\\u003c\"");
}

TEST_CASE("csv_escape makes the field printable and quotes it when the original needs it") {
    CHECK(text::csv_escape("") == "");
    CHECK(text::csv_escape("main") == "main");
    CHECK(text::csv_escape("f(int, int)") == "\"f(int, int)\"");
    CHECK(text::csv_escape("say \"hi\"") == "\"say \"\"hi\"\"\"");
    // A newline is made printable, and still quotes the field as it did.
    CHECK(text::csv_escape("a\nb") == "\"a\\x0ab\"");
    CHECK(text::csv_escape("a\rb") == "\"a\\x0db\"");
    CHECK(text::csv_escape("a\tb") == "a\\x09b");
    CHECK(text::csv_escape("ü;x") == "ü;x");
}

TEST_CASE("xml_escape writes entities and replaces control characters except tab") {
    CHECK(text::xml_escape("") == "");
    CHECK(text::xml_escape("a<b>&\"c\"'d'") == "a&lt;b&gt;&amp;&quot;c&quot;&#39;d&#39;");
    CHECK(text::xml_escape("a\tb") == "a\tb");
    CHECK(text::xml_escape("a\nb\x01\0"s) == "a\xEF\xBF\xBD"
                                             "b\xEF\xBF\xBD\xEF\xBF\xBD");
    CHECK(text::xml_escape("\x7f ü") == "\x7f ü");
}

TEST_CASE("format_bytes uses binary units with two decimals above bytes") {
    CHECK(text::format_bytes(0) == "0 B");
    CHECK(text::format_bytes(512) == "512 B");
    CHECK(text::format_bytes(1023) == "1023 B");
    CHECK(text::format_bytes(1024) == "1.00 KiB");
    CHECK(text::format_bytes(10286432) == "9.81 MiB");
    CHECK(text::format_bytes(-2048) == "-2.00 KiB");
    CHECK(text::format_bytes(-5) == "-5 B");
    CHECK(text::format_bytes(3.0 * 1024 * 1024 * 1024) == "3.00 GiB");
    // Beyond TiB the unit stays TiB.
    CHECK(text::format_bytes(2048.0 * 1024 * 1024 * 1024 * 1024) == "2048.00 TiB");
}
