// Whether the settings that change what is computed took effect in a run: each KILN_INJECT entry (its bug was
// injected somewhere) and each KILN_BISECT_DISABLE / KILN_BISECT_LIMIT entry (a site it names was asked). A run
// whose settings never fired says so once per setting, when it ends, not once per compile or per trial run: the
// tools run most of their work in forked children (repro/isolate.h), which record into the same table (an
// anonymous shared mapping made when the process starts), and the process that made it warns at the end.
//
// Only the settings in effect at exit are checked (the environment's: a tool's own trial settings, applied as
// overrides in its children, are gone by then), and only when something read them (a compile, an AOT trace, a
// bisection site): `KILN_INJECT=relu:accuracy kiln verify g.kir` compiles nothing and warns about nothing.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

// `setting` ("KILN_INJECT=relu:accuracy", "KILN_BISECT_DISABLE=passes:cse") took effect in this run.
void note_setting_fired(std::string_view setting);
// KILN_INJECT's entry `target:kind` injected its bug (note_setting_fired("KILN_INJECT=target:kind")).
void note_injection_fired(std::string_view target, std::string_view kind);
// Something that reads these settings ran (so an entry that never fired changed nothing).
void note_settings_read();
// Whether note_setting_fired(setting) was called in this run (this process or a child forked from it).
bool setting_fired(std::string_view setting);

// The warnings for the settings in effect that were read but never fired, one line each: what
// warn_unfired_settings prints.
std::vector<std::string> unfired_setting_warnings();
// Prints them on stderr (`kiln: warning: ...`), once per run, in the process that started it (elsewhere nothing):
// the kiln CLI calls it when its command ends; a program that compiles in its own process gets it at exit.
void warn_unfired_settings();

}  // namespace kiln
