#include "outputs.h"

#include "svg.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace rnn {

namespace {

constexpr const char* kLossHeader = "step,train_loss,val_loss,elapsed_s";

std::string csv_line(const LogRow& r) {
  char buf[160];
  char val[40] = "";
  if (r.val_loss)
    std::snprintf(val, sizeof val, "%.9g", *r.val_loss); // 9 digits: an f32 to the bit
  std::snprintf(buf, sizeof buf, "%lld,%.9g,%s,%.3f", static_cast<long long>(r.step), r.train_loss,
                val, r.elapsed_s);
  return buf;
}

std::optional<LogRow> parse_line(const std::string& line) {
  std::vector<std::string> f;
  std::stringstream ss(line);
  for (std::string cell; std::getline(ss, cell, ',');) f.push_back(cell);
  if (f.size() == 3 && !line.empty() && line.back() == ',') f.push_back("");
  if (f.size() != 4) return std::nullopt;
  try {
    LogRow r{std::stoll(f[0]), std::stod(f[1]), std::nullopt, std::stod(f[3])};
    if (!f[2].empty()) r.val_loss = std::stod(f[2]);
    return r;
  } catch (const std::exception&) {
    return std::nullopt; // the header, or a line cut short by a crash
  }
}

std::ofstream open_or_throw(const std::string& path, std::ios::openmode mode) {
  std::ofstream f(path, mode);
  if (!f) throw std::runtime_error("cannot write " + path);
  return f;
}

} // namespace

void LossLog::start_fresh() {
  rows_.clear();
  rewrite();
}

void LossLog::resume_at(int64_t step) {
  rows_.clear();
  std::ifstream in(path_);
  for (std::string line; std::getline(in, line);)
    if (std::optional<LogRow> r = parse_line(line); r && r->step <= step) rows_.push_back(*r);
  rewrite();
}

void LossLog::rewrite() const {
  std::ofstream f = open_or_throw(path_, std::ios::trunc);
  f << kLossHeader << "\n";
  for (const LogRow& r : rows_) f << csv_line(r) << "\n";
}

void LossLog::append(const LogRow& row) {
  rows_.push_back(row);
  std::ofstream f = open_or_throw(path_, std::ios::app);
  f << csv_line(row) << "\n";
}

void write_prediction_csv(const std::string& path, const Prediction& p) {
  std::ofstream f = open_or_throw(path, std::ios::trunc);
  f << "t,true,predicted\n";
  char buf[96];
  for (size_t i = 0; i < p.t.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%lld,%.6g,%.6g\n", static_cast<long long>(p.t[i]),
                  double(p.truth[i]), double(p.predicted[i]));
    f << buf;
  }
}

void write_training_svg(const std::string& path, const std::vector<LogRow>& rows,
                        const Prediction& p, double noise_floor, const std::string& title) {
  svg::Series train{"train loss", "#1f77b4", {}, {}}, val{"validation loss", "#d62728", {}, {}};
  for (const LogRow& r : rows) {
    train.x.push_back(double(r.step)), train.y.push_back(r.train_loss);
    if (r.val_loss) val.x.push_back(double(r.step)), val.y.push_back(*r.val_loss);
  }
  val.markers = true;
  svg::Series floor{"noise floor (noise variance)", "#999999", {}, {}};
  if (!rows.empty()) {
    floor.x = {double(rows.front().step), double(rows.back().step)};
    floor.y = {noise_floor, noise_floor};
    floor.dashed = true;
  }
  svg::Panel losses{
      "Loss (MSE of the next-value prediction)", "training step", "MSE", true, {train, val, floor}};
  svg::Series truth{"true series", "#333333", {}, {}},
      pred{"predicted (one step ahead)", "#ff7f0e", {}, {}};
  for (size_t i = 0; i < p.t.size(); ++i) {
    truth.x.push_back(double(p.t[i])), truth.y.push_back(p.truth[i]);
    pred.x.push_back(double(p.t[i])), pred.y.push_back(p.predicted[i]);
  }
  svg::Panel series{"Validation series: true vs predicted",
                    "t (index in the series)",
                    "value",
                    false,
                    {truth, pred}};
  svg::write(path, title, {losses, series});
}

} // namespace rnn
