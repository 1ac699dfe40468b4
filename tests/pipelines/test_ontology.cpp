#include <gtest/gtest.h>

#include "core/error.h"
#include "pipelines/ontology.h"

namespace vlrt {

namespace {

template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string yaml_error(const std::string& text) {
  return error_of([&] { parse_class_yaml(text, "classes.yaml"); });
}

}  // namespace

TEST(Ontology, ListMapsPhrasesToClassNames) {
  Ontology o = parse_class_list("shipping container=container, car ,container box = container");
  EXPECT_EQ(o.phrases, (std::vector<std::string>{"shipping container", "car", "container box"}));
  EXPECT_EQ(o.class_names(), (std::vector<std::string>{"container", "car"}));
  EXPECT_EQ(o.phrase_class, (std::vector<int>{0, 1, 0}));
  EXPECT_FALSE(o.explicit_ids);
  EXPECT_EQ(o.class_id(1), 1);
  EXPECT_EQ(o.prompt(), "shipping container . car . container box .");
}

TEST(Ontology, EmptyListEntriesAreNamedErrors) {
  std::string e = error_of([] { parse_class_list("car, , bus"); });
  EXPECT_NE(e.find("--classes entry 2"), std::string::npos) << e;
  EXPECT_NE(e.find("empty"), std::string::npos) << e;
  e = error_of([] { parse_class_list("=car"); });
  EXPECT_NE(e.find("entry 1 ('=car'): the prompt phrase is empty"), std::string::npos) << e;
  e = error_of([] { parse_class_list("car=, bus"); });
  EXPECT_NE(e.find("entry 1 ('car='): the class name is empty"), std::string::npos) << e;
  e = error_of([] { parse_class_list("car, Car"); });
  EXPECT_NE(e.find("'Car' is given twice"), std::string::npos) << e;
  e = error_of([] { parse_class_list("st. louis arch=arch"); });
  EXPECT_NE(e.find("holds '.'"), std::string::npos) << e;
}

TEST(Ontology, YamlBlockAndFlowEntriesWithIds) {
  Ontology o = parse_class_yaml(
      "# classes\n"
      "- phrase: shipping container   # the long name\n"
      "  name: container\n"
      "  id: 3\n"
      "\n"
      "- {phrase: 'container box', name: container}\n"
      "- phrase: \"car\"\n"
      "  id: 0\n",
      "classes.yaml");
  EXPECT_EQ(o.phrases, (std::vector<std::string>{"shipping container", "container box", "car"}));
  EXPECT_EQ(o.class_names(), (std::vector<std::string>{"container", "car"}));
  EXPECT_EQ(o.phrase_class, (std::vector<int>{0, 0, 1}));
  ASSERT_TRUE(o.explicit_ids);
  EXPECT_EQ(o.class_id(0), 3);
  EXPECT_EQ(o.class_id(1), 0);
}

TEST(Ontology, YamlErrorsNameTheLine) {
  std::string e = yaml_error("- phrase: car\n  name car\n");
  EXPECT_NE(e.find("classes.yaml:2: expected 'key: value'"), std::string::npos) << e;
  e = yaml_error("- phrase: car\nname: auto\n");
  EXPECT_NE(e.find("classes.yaml:2: expected a list entry"), std::string::npos) << e;
  e = yaml_error("- phrase: car\n  colour: red\n");
  EXPECT_NE(e.find("classes.yaml:2: unknown key 'colour'"), std::string::npos) << e;
  e = yaml_error("- phrase: car\n- name: bus\n");
  EXPECT_NE(e.find("classes.yaml:2: the entry has no 'phrase'"), std::string::npos) << e;
  e = yaml_error("- {phrase: car, name: auto\n");
  EXPECT_NE(e.find("classes.yaml:1: a '{' entry must end with '}'"), std::string::npos) << e;
  e = yaml_error("- phrase: 'car\n");
  EXPECT_NE(e.find("classes.yaml:1: unterminated quoted string"), std::string::npos) << e;
  e = yaml_error("- phrase: car\n  id: -1\n");
  EXPECT_NE(e.find("classes.yaml:1: id '-1' is not a whole number"), std::string::npos) << e;
  e = yaml_error("- phrase: car\n  id: 1\n- phrase: bus\n  id: 1\n");
  EXPECT_NE(e.find("classes.yaml:3: id 1 is already the id of class 'car'"), std::string::npos) << e;
  e = yaml_error("- phrase: car\n  id: 1\n- phrase: bus\n");
  EXPECT_NE(e.find("1 of 2 classes have an id"), std::string::npos) << e;
  e = yaml_error("# nothing\n");
  EXPECT_NE(e.find("no entries"), std::string::npos) << e;
  e = yaml_error("- phrase: ''\n");
  EXPECT_NE(e.find("classes.yaml:1: 'phrase' has no value"), std::string::npos) << e;
}

TEST(Ontology, ClassesArgumentReadsYamlFiles) {
  EXPECT_EQ(load_classes("car, bus").phrases.size(), 2u);
  std::string e = error_of([] { load_classes("no_such_ontology.yaml"); });
  EXPECT_NE(e.find("no_such_ontology.yaml"), std::string::npos) << e;
}

}  // namespace vlrt
