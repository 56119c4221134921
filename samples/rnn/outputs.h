#pragma once
// What a run leaves in --out besides the checkpoint: loss.csv (kept across --resume),
// prediction.csv and training.svg.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rnn {

struct LogRow {
  int64_t step = 0;
  double train_loss = 0; // mean over the steps since the previous row
  std::optional<double> val_loss;
  double elapsed_s = 0; // training time since step 0, earlier runs of a resumed training included
};

/// loss.csv: the rows in memory (for the plot) and on disk, written as they come.
class LossLog {
public:
  explicit LossLog(std::string path) : path_(std::move(path)) {}
  /// A new file with only the header.
  void start_fresh();
  /// Keeps the rows of an earlier run up to `step` (when the file exists) and rewrites the file.
  void resume_at(int64_t step);
  void append(const LogRow& row);
  const std::vector<LogRow>& rows() const { return rows_; }

private:
  void rewrite() const;
  std::string path_;
  std::vector<LogRow> rows_;
};

/// One-step-ahead predictions over a stretch of the validation series.
struct Prediction {
  std::vector<int64_t> t; // index in the whole series
  std::vector<float> truth, predicted;
};

void write_prediction_csv(const std::string& path, const Prediction& p);

/// Two panels: train/validation loss (log scale, with the noise floor) and truth vs prediction.
void write_training_svg(const std::string& path, const std::vector<LogRow>& rows,
                        const Prediction& p, double noise_floor, const std::string& title);

} // namespace rnn
