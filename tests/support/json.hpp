// A small strict JSON parser for tests: a rendering must parse whole, and its values are then
// checked by path. Numbers keep their text too, so integers are compared exactly.
#pragma once

#include <cctype>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace prof::test {

struct Json {
    enum Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = kNull;
    bool boolean = false;
    double number = 0;
    std::string text; // a string's value, or a number as written
    std::vector<Json> items;
    std::vector<std::pair<std::string, Json>> fields; // in document order

    // The field `key` of an object; throws when there is none.
    const Json& operator[](const std::string& key) const {
        for (const auto& [k, v] : fields)
            if (k == key) return v;
        throw std::runtime_error("no field " + key);
    }
    const Json& operator[](size_t i) const { return items.at(i); }
    bool has(const std::string& key) const {
        for (const auto& f : fields)
            if (f.first == key) return true;
        return false;
    }
    size_t size() const { return kind == kArray ? items.size() : fields.size(); }
    unsigned long long integer() const { return std::strtoull(text.c_str(), nullptr, 10); }
};

class JsonParser {
  public:
    explicit JsonParser(const std::string& s) : s_(s) {}
    Json document() {
        Json v = value();
        space();
        if (i_ != s_.size()) fail("trailing characters");
        return v;
    }

  private:
    [[noreturn]] void fail(const std::string& what) {
        throw std::runtime_error("JSON at " + std::to_string(i_) + ": " + what);
    }
    void space() {
        while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
    }
    bool take(const char* word) {
        size_t n = std::char_traits<char>::length(word);
        if (s_.compare(i_, n, word) != 0) return false;
        i_ += n;
        return true;
    }
    void expect(char c) {
        space();
        if (i_ >= s_.size() || s_[i_] != c) fail(std::string("expected ") + c);
        ++i_;
    }
    Json value() {
        space();
        if (i_ >= s_.size()) fail("unexpected end");
        Json v;
        char c = s_[i_];
        if (c == '{') {
            v.kind = Json::kObject;
            ++i_;
            space();
            if (s_[i_] == '}') return ++i_, v;
            for (;;) {
                space();
                if (s_[i_] != '"') fail("expected a key");
                std::string key = string();
                expect(':');
                v.fields.emplace_back(key, value());
                space();
                if (i_ < s_.size() && s_[i_] == ',') {
                    ++i_;
                    continue;
                }
                expect('}');
                return v;
            }
        }
        if (c == '[') {
            v.kind = Json::kArray;
            ++i_;
            space();
            if (s_[i_] == ']') return ++i_, v;
            for (;;) {
                v.items.push_back(value());
                space();
                if (i_ < s_.size() && s_[i_] == ',') {
                    ++i_;
                    continue;
                }
                expect(']');
                return v;
            }
        }
        if (c == '"') {
            v.kind = Json::kString;
            v.text = string();
            return v;
        }
        if (take("true")) return v.kind = Json::kBool, v.boolean = true, v;
        if (take("false")) return v.kind = Json::kBool, v;
        if (take("null")) return v;
        size_t start = i_;
        if (s_[i_] == '-') ++i_;
        while (i_ < s_.size() &&
               (std::isdigit(static_cast<unsigned char>(s_[i_])) || s_[i_] == '.' ||
                s_[i_] == 'e' || s_[i_] == 'E' || s_[i_] == '+' || s_[i_] == '-'))
            ++i_;
        if (i_ == start) fail(std::string("unexpected '") + c + "'");
        v.kind = Json::kNumber;
        v.text = s_.substr(start, i_ - start);
        char* end = nullptr;
        v.number = std::strtod(v.text.c_str(), &end);
        if (*end) fail("bad number " + v.text);
        return v;
    }
    std::string string() {
        ++i_; // the opening quote
        std::string out;
        while (i_ < s_.size() && s_[i_] != '"') {
            unsigned char c = static_cast<unsigned char>(s_[i_++]);
            if (c < 0x20) fail("control character in a string");
            if (c != '\\') {
                out += char(c);
                continue;
            }
            if (i_ >= s_.size()) break;
            char e = s_[i_++];
            switch (e) {
            case 'n':
                out += '\n';
                break;
            case 't':
                out += '\t';
                break;
            case 'r':
                out += '\r';
                break;
            case 'b':
                out += '\b';
                break;
            case 'f':
                out += '\f';
                break;
            case '"':
            case '\\':
            case '/':
                out += e;
                break;
            case 'u': {
                if (i_ + 4 > s_.size()) fail("bad \\u escape");
                unsigned cp = unsigned(std::strtoul(s_.substr(i_, 4).c_str(), nullptr, 16));
                i_ += 4;
                if (cp < 0x80)
                    out += char(cp);
                else if (cp < 0x800)
                    out += char(0xc0 | (cp >> 6)), out += char(0x80 | (cp & 0x3f));
                else
                    out += char(0xe0 | (cp >> 12)), out += char(0x80 | ((cp >> 6) & 0x3f)),
                        out += char(0x80 | (cp & 0x3f));
                break;
            }
            default:
                fail(std::string("bad escape \\") + e);
            }
        }
        if (i_ >= s_.size()) fail("unterminated string");
        ++i_;
        return out;
    }

    const std::string& s_;
    size_t i_ = 0;
};

inline Json parse_json(const std::string& s) {
    return JsonParser(s).document();
}

} // namespace prof::test
