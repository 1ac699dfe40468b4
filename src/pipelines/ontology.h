// A class ontology: which prompt phrases mean which classes. The prompt is made of the
// phrases; labels, class ids and every annotation format use the class names, and several
// phrases may name one class ("shipping container" and "container box" -> container).
//
// On the command line (--classes): a comma-separated list of PHRASE=NAME or NAME entries
//   "shipping container=container, car"
// or a YAML file (.yaml / .yml) holding a list of mappings, one per phrase, in block or
// flow style; `name` defaults to the phrase, `id` (given for every class or for none) is
// the class id written to YOLO and COCO files:
//   - phrase: shipping container
//     name: container
//     id: 0
//   - {phrase: car, name: car, id: 1}
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace vlrt {

struct OntologyClass {
  std::string name;
  int id = -1;  // as given; -1 when the ontology gives none
};

struct Ontology {
  std::vector<std::string> phrases;    // the prompt's phrases, in order
  std::vector<int> phrase_class;       // per phrase: its class's index in `classes`
  std::vector<OntologyClass> classes;  // distinct names, in the order first named
  bool explicit_ids = false;

  // "phrase . phrase .": what the model is prompted with.
  std::string prompt() const;
  // The id a class is written with: the given one, else its index.
  int class_id(size_t index) const { return explicit_ids ? classes[index].id : int(index); }
  std::vector<std::string> class_names() const;
};

// Every phrase its own class (what a plain --prompt means).
Ontology ontology_from_phrases(const std::vector<std::string>& phrases);
// "PHRASE=NAME, NAME, ..."; fails naming an empty or malformed entry.
Ontology parse_class_list(std::string_view list);
// The YAML form above; fails naming the file and line.
Ontology parse_class_yaml(std::string_view text, const std::string& file);
// --classes: a .yaml/.yml file, else a list.
Ontology load_classes(const std::string& arg);

}  // namespace vlrt
