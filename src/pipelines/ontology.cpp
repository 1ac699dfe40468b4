#include "pipelines/ontology.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "core/error.h"
#include "io/files.h"

namespace vlrt {

namespace {

std::string_view trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

std::string lower_ascii(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

// One phrase -> class entry; `where` names it in errors ("--classes entry 2 ('=car')", "f.yaml:3").
void add_entry(Ontology& o, std::string_view phrase, std::string_view name, int id,
               const std::string& where) {
  phrase = trim(phrase);
  name = trim(name);
  if (phrase.empty()) fail(where, ": the prompt phrase is empty");
  if (name.empty()) fail(where, ": the class name is empty");
  if (phrase.find_first_of(".?") != std::string_view::npos)
    fail(where, ": the phrase '", phrase, "' holds '.' or '?', which separate phrases in the prompt");
  for (auto& p : o.phrases)
    if (lower_ascii(p) == lower_ascii(std::string(phrase)))
      fail(where, ": the phrase '", phrase, "' is given twice (the prompt is lower-cased)");
  auto it = std::find_if(o.classes.begin(), o.classes.end(),
                         [&](const OntologyClass& c) { return c.name == name; });
  if (it != o.classes.end() && it->id >= 0 && id >= 0 && it->id != id)
    fail(where, ": class '", name, "' was given id ", it->id, " before, ", id, " here");
  if (id >= 0)
    for (auto& c : o.classes)
      if (c.id == id && c.name != name)
        fail(where, ": id ", id, " is already the id of class '", c.name, "'");
  if (it == o.classes.end()) {
    o.classes.push_back({std::string(name), id});
    it = o.classes.end() - 1;
  } else if (id >= 0) {
    it->id = id;
  }
  o.phrases.emplace_back(phrase);
  o.phrase_class.push_back(int(it - o.classes.begin()));
}

// Ids for every class or for none.
void check_ids(Ontology& o, const std::string& source) {
  size_t with =
      std::count_if(o.classes.begin(), o.classes.end(), [](const OntologyClass& c) { return c.id >= 0; });
  if (with != 0 && with != o.classes.size())
    fail(source, ": ", with, " of ", o.classes.size(),
         " classes have an id; give an id to every class or to none");
  o.explicit_ids = with != 0;
}

// YAML scalars: plain, 'single' ('' is a quote) or "double" (\" and \\ escaped).
std::string yaml_scalar(std::string_view v, const std::string& where) {
  v = trim(v);
  if (v.empty() || (v[0] != '\'' && v[0] != '"')) return std::string(v);
  char q = v[0];
  std::string out;
  size_t i = 1;
  for (; i < v.size(); i++) {
    if (v[i] == q) {
      if (q == '\'' && i + 1 < v.size() && v[i + 1] == '\'') {
        out += '\'';
        i++;
        continue;
      }
      break;
    }
    if (q == '"' && v[i] == '\\' && i + 1 < v.size()) i++;
    out += v[i];
  }
  if (i >= v.size()) fail(where, ": unterminated quoted string ", v);
  if (!trim(v.substr(i + 1)).empty()) fail(where, ": unexpected text after the quoted string ", v);
  return out;
}

// Where `c` first occurs outside quotes at depth 0, or npos.
size_t find_unquoted(std::string_view s, std::string_view chars, size_t from = 0) {
  char quote = 0;
  for (size_t i = from; i < s.size(); i++) {
    if (quote) {
      if (s[i] == quote) quote = 0;
    } else if (s[i] == '\'' || s[i] == '"') {
      quote = s[i];
    } else if (chars.find(s[i]) != std::string_view::npos) {
      return i;
    }
  }
  return std::string_view::npos;
}

struct YamlItem {
  std::string where;  // file:line of its '-'
  std::map<std::string, std::string> fields;
};

void add_yaml_field(YamlItem& item, std::string_view text, const std::string& where) {
  size_t colon = find_unquoted(text, ":");
  while (colon != std::string_view::npos && colon + 1 < text.size() && text[colon + 1] != ' ')
    colon = find_unquoted(text, ":", colon + 1);
  if (colon == std::string_view::npos) fail(where, ": expected 'key: value', got '", trim(text), "'");
  std::string key(trim(text.substr(0, colon)));
  if (key != "phrase" && key != "name" && key != "id")
    fail(where, ": unknown key '", key, "'; an entry has phrase, name (optional) and id (optional)");
  if (item.fields.count(key)) fail(where, ": '", key, "' is given twice in one entry");
  std::string value = yaml_scalar(text.substr(colon + 1), where);
  if (value.empty()) fail(where, ": '", key, "' has no value");
  item.fields[key] = value;
}

}  // namespace

std::string Ontology::prompt() const {
  std::string out;
  for (auto& p : phrases) out += (out.empty() ? "" : " ") + p + " .";
  return out;
}

std::vector<std::string> Ontology::class_names() const {
  std::vector<std::string> out;
  for (auto& c : classes) out.push_back(c.name);
  return out;
}

Ontology ontology_from_phrases(const std::vector<std::string>& phrases) {
  Ontology o;
  for (size_t i = 0; i < phrases.size(); i++) {
    o.phrases.push_back(phrases[i]);
    o.phrase_class.push_back(int(i));
    o.classes.push_back({phrases[i], -1});
  }
  return o;
}

Ontology parse_class_list(std::string_view list) {
  Ontology o;
  size_t n = 0, start = 0;
  while (start <= list.size()) {
    size_t comma = std::min(list.find(',', start), list.size());
    std::string_view entry = list.substr(start, comma - start);
    std::string where = cat("--classes entry ", ++n, " ('", trim(entry), "')");
    size_t eq = entry.find('=');
    if (eq == std::string_view::npos) {
      add_entry(o, entry, entry, -1, where);
    } else {
      if (entry.find('=', eq + 1) != std::string_view::npos)
        fail(where, ": more than one '='; write PHRASE=NAME");
      add_entry(o, entry.substr(0, eq), entry.substr(eq + 1), -1, where);
    }
    start = comma + 1;
  }
  return o;
}

Ontology parse_class_yaml(std::string_view text, const std::string& file) {
  std::vector<YamlItem> items;
  int dash_indent = -1;
  size_t line_no = 0, start = 0;
  while (start < text.size()) {
    size_t end = std::min(text.find('\n', start), text.size());
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    std::string where = cat(file, ":", ++line_no);
    size_t hash = find_unquoted(line, "#");
    while (hash != std::string_view::npos && hash > 0 && line[hash - 1] != ' ' && line[hash - 1] != '\t')
      hash = find_unquoted(line, "#", hash + 1);
    if (hash != std::string_view::npos) line = line.substr(0, hash);
    if (trim(line).empty() || trim(line) == "---") continue;
    size_t indent = line.find_first_not_of(' ');
    if (line[indent] == '\t') fail(where, ": a tab in the indentation; YAML indents with spaces");
    std::string_view body = trim(line);
    if (body == "-" || body.starts_with("- ")) {
      if (dash_indent >= 0 && int(indent) != dash_indent)
        fail(where, ": this entry is indented ", indent, " spaces, the first one ", dash_indent);
      dash_indent = int(indent);
      items.push_back({where, {}});
      std::string_view rest = trim(body.substr(1));
      if (rest.starts_with('{')) {
        if (!rest.ends_with('}')) fail(where, ": a '{' entry must end with '}' on the same line");
        std::string_view inner = rest.substr(1, rest.size() - 2);
        for (size_t from = 0; from <= inner.size();) {
          size_t comma = std::min(find_unquoted(inner, ",", from), inner.size());
          add_yaml_field(items.back(), inner.substr(from, comma - from), where);
          from = comma + 1;
        }
      } else if (!rest.empty()) {
        add_yaml_field(items.back(), rest, where);
      }
    } else {
      if (items.empty() || int(indent) <= dash_indent)
        fail(where, ": expected a list entry '- phrase: ...', got '", body, "'");
      add_yaml_field(items.back(), body, where);
    }
  }
  if (items.empty()) fail(file, ": no entries; expected a list of '- phrase: ...' entries");
  Ontology o;
  for (auto& item : items) {
    auto field = [&](const char* key) {
      return item.fields.count(key) ? item.fields.at(key) : std::string();
    };
    if (!item.fields.count("phrase")) fail(item.where, ": the entry has no 'phrase'");
    std::string name = item.fields.count("name") ? field("name") : field("phrase");
    int id = -1;
    if (item.fields.count("id")) {
      std::string s = field("id");
      if (s.size() > 6 || s.find_first_not_of("0123456789") != std::string::npos)
        fail(item.where, ": id '", s, "' is not a whole number from 0 to 999999");
      id = std::stoi(s);
    }
    add_entry(o, field("phrase"), name, id, item.where);
  }
  check_ids(o, file);
  return o;
}

Ontology load_classes(const std::string& arg) {
  std::string lower = lower_ascii(arg);
  if (lower.ends_with(".yaml") || lower.ends_with(".yml")) return parse_class_yaml(read_file(arg), arg);
  return parse_class_list(arg);
}

}  // namespace vlrt
