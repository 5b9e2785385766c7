#pragma once
// The versioned JSON form of a RunReport, and the files that hold it.
//
// The layout and its versioning rules are documented in reports/schema/report-v1.md (JSON Schema:
// reports/schema/report-v1.schema.json). In short: values are compact (measurement name -> number)
// and the unit and description of every measurement name are written once, in the top-level
// "measurements" dictionary. The JSON is valid by construction: a value that was not measured, or
// that is not finite, is null, never NaN.
//
// Objects keep the order in which they were written (nlohmann::ordered_json), so the file reads
// top-down (schema version, provenance, warnings, scenarios) and a round trip keeps the order of
// measurements. A nlohmann::json converts to and from ReportJson implicitly.
#include <nlohmann/json.hpp>
#include <string>

#include "harness/report/io/atomic_write.h"
#include "harness/report/model/result.h"

namespace harness {

using ReportJson = nlohmann::ordered_json;

// The schema version written into every report; readers accept any version with this major.
inline constexpr const char* kReportSchemaVersion = "1.11.0";
inline constexpr int kReportSchemaMajor = 1;

ReportJson to_json(const RunReport& report);

// A number as reports write it: integral values (below 2^53, where doubles are exact) as JSON
// integers, others as doubles; missing and non-finite values as null (never NaN or Infinity).
ReportJson value_json(const std::optional<double>& value);

// Reads a report (typically a baseline). Unknown fields are ignored. Throws InputError naming
// `source_name` and the offending field when the JSON is not a report of schema major version 1.
RunReport report_from_json(const ReportJson& json, const std::string& source_name);
// The same, letting go of each variant's JSON as soon as it is read: the document and the report
// are never both whole in memory.
RunReport report_from_json(ReportJson&& json, const std::string& source_name);

// Reads and parses a report file. Throws InputError when it cannot be read, is not JSON (the
// message carries the parser's position) or is not a valid report.
RunReport read_report_file(const std::string& path);
// The same on a report's text (a file's contents, a rank's result); `source` names it in messages.
RunReport parse_report_text(const std::string& text, const std::string& source);

// Writes the report as indented JSON, atomically (see write_file_atomically).
void write_report_file(const std::string& path, const RunReport& report);




}  // namespace harness
