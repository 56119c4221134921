# Experiment only: the sample evaluates its parameters and optimizer state in the Trainer's
# constructor and prints how long construction took, so that step 1 is the training step alone.
import re
p='samples/rnn/train.cpp'
s=open(p).read()
old="""  loss_sum_ = kiln::zeros({}, dtype_of(c_));
  step_fn_ = compiled_step();
}"""
new="""  loss_sum_ = kiln::zeros({}, dtype_of(c_));
  step_fn_ = compiled_step();
  std::vector<kiln::Tensor> all{loss_sum_, val_windows_};
  for (const kiln::nn::NamedParam& p : kiln::nn::join({params_, opt_.state()})) all.push_back(*p.tensor);
  kiln::eval(all);
  kiln::sync();
  std::fprintf(stderr, "SETUP_MS %.1f\\n", std::chrono::duration<double, std::milli>(Clock::now() - setup_start_).count());
}"""
assert old in s
s=s.replace(old,new)
s=s.replace("Trainer::Trainer(const Config& c)\n    : c_(c),","Trainer::Trainer(const Config& c)\n    : setup_start_(Clock::now()), c_(c),")
if '#include <cstdio>' not in s: s='#include <cstdio>\n'+s
open(p,'w').write(s)
p='samples/rnn/train.h'
s=open(p).read()
s=s.replace("class Trainer {\npublic:", "class Trainer {\n  std::chrono::steady_clock::time_point setup_start_;\npublic:",1)
open(p,'w').write(s)
