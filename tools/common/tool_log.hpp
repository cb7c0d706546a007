// Structured messages from the command-line tools, on stderr: `tool: level=error msg="…"`
// for people, or one JSON object per line with --log-format json or PROF_LOG_FORMAT=json.
#pragma once

#include "reader/trace_reader.hpp"
#include "text/text.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

namespace prof::tools {

struct ToolLog {
    const char* tool = "prof";
    bool json = false;

    explicit ToolLog(const char* name) : tool(name) {
        const char* f = std::getenv("PROF_LOG_FORMAT");
        json = f && std::strcmp(f, "json") == 0;
    }

    void write(std::string_view level, std::string_view msg) const {
        std::string text = text::printable(msg);
        if (json)
            fmt::print(stderr, "{{\"tool\":\"{}\",\"level\":\"{}\",\"msg\":\"{}\"}}\n", tool, level,
                       text::json_escape(msg, text::JsonForm::kPlain));
        else {
            std::string quoted;
            for (char c : text) quoted += c == '"' ? std::string("\\\"") : std::string(1, c);
            fmt::print(stderr, "{}: level={} msg=\"{}\"\n", tool, level, quoted);
        }
    }
    void error(std::string_view msg) const { write("error", msg); }
    void warn(std::string_view msg) const { write("warn", msg); }
    void info(std::string_view msg) const { write("info", msg); }
};

} // namespace prof::tools
