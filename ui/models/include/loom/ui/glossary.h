// The workbench's explanations in one place: every term a person meets on screen (the
// strategy form, the breakdown's categories, the timeline's kinds, the Help menu's
// glossary) with a plain explanation and, where there is one, the formula. One table, so
// a tooltip, the glossary and the tour never explain a term two different ways.
#pragma once

#include <QString>

#include <vector>

namespace loom::ui {

struct Term {
  QString key;      // stable id used by the views ("bubble", "exposed_comm")
  QString name;     // as shown ("Bubble", "Exposed communication")
  QString text;     // what it is, in a sentence or three
  QString formula;  // "(p-1)/(m+p-1)"; empty when the term has none
};

// Every term, in the order the glossary lists them (concepts first, then the breakdown's
// categories).
const std::vector<Term>& glossary();
// nullptr for an unknown key.
const Term* find_term(const QString& key);
// "Name: text Formula: ..." as plain text for a tooltip; "" for an unknown key.
QString term_tooltip(const QString& key);
// The whole glossary as HTML with an anchor per key (<a name="bubble">), for the Help menu.
QString glossary_html();

}  // namespace loom::ui
