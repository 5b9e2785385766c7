"""Stable-Baselines3's own algorithms, learn() on gymnasium's built-in environments (no download):
PPO on CartPole-v1, SAC on Pendulum-v1; device "auto" (CUDA when torch has it). Ours: the sizes.

    python sb3.py ppo|sac"""
import sys

from stable_baselines3 import PPO, SAC

algorithm = sys.argv[1] if len(sys.argv) > 1 else "ppo"
if algorithm == "ppo":
    model = PPO("MlpPolicy", "CartPole-v1", n_steps=64, batch_size=32, n_epochs=2, seed=0,
                device="auto", verbose=0)
    model.learn(total_timesteps=128)
else:
    model = SAC("MlpPolicy", "Pendulum-v1", learning_starts=16, batch_size=16, buffer_size=1000,
                train_freq=1, gradient_steps=1, seed=0, device="auto", verbose=0)
    model.learn(total_timesteps=24)
print(f"sb3 {algorithm}: on {model.device}, {model.num_timesteps} timesteps")
