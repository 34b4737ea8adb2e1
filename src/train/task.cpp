#include "train/task.h"

namespace rotor::train {

std::unique_ptr<TrainingTask> make_task(const Config& c, Device device, int rank, int world_size) {
  switch (c.task) {
    case Task::Translation:
      return make_translation_task(c, device, rank, world_size);
    case Task::Mlm:
      return make_mlm_task(c, device, rank, world_size);
  }
  ROTOR_FAIL("task: {} has no trainer", to_string(c.task));
}

}  // namespace rotor::train
