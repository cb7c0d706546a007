// Text helpers shared by the reader, the renderers and the tools: names from a trace made safe
// for the terminal, JSON, CSV and XML, and byte counts for people. One definition of each, on
// the floor below everything that prints (it needs only fmt), so no layer keeps its own copy.
#pragma once

#include <string>
#include <string_view>

namespace prof::text {

// For the terminal: control characters (U+0000..U+001F) and DEL as `\xNN`, so that a name from
// a trace cannot drive the terminal. Every other byte, UTF-8 included, is kept as it is.
std::string printable(std::string_view s);

// How json_escape writes a string. Each form is valid JSON and reads back as the same string;
// they differ only in which characters are escaped, and each output keeps its form byte for byte.
enum class JsonForm {
    // `"`, `\`, \n, \t and \r as short escapes; other controls and DEL as \u00XX; and `<`, `>`
    // and `&` as \u00XX too, so that the JSON can sit inside an HTML <script> element. The
    // renderers' form, and the default: it is safe wherever the JSON lands.
    kEmbeddable,
    // As kEmbeddable, with `<`, `>` and `&` kept: the tools' structured messages.
    kPlain,
    // `"`, `\`, \n and \t as short escapes; every other control (\r too) as \u00XX; DEL kept:
    // the run manifest (run.json), as it has always been written.
    kManifest,
};

// The body of a JSON string (without its quotes).
std::string json_escape(std::string_view s, JsonForm form = JsonForm::kEmbeddable);
// A JSON string with its quotes: "\"" + json_escape(s, form) + "\"".
std::string json_quoted(std::string_view s, JsonForm form = JsonForm::kEmbeddable);

// A CSV field: printable() first; then, if the original held a comma, a quote, \n or \r, the
// field quoted with its quotes doubled (RFC 4180).
std::string csv_escape(std::string_view s);

// For SVG and HTML: &, <, >, " and ' as entities; control characters (not allowed in XML 1.0)
// as U+FFFD, tab kept.
std::string xml_escape(std::string_view s);

// "512 B", "9.81 MiB", "-2.00 KiB": binary units up to TiB, two decimals above bytes.
std::string format_bytes(double bytes);

// 2713 -> "2,713"
std::string grouped(uint64_t n);

} // namespace prof::text
