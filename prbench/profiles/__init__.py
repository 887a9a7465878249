"""Profile builders: turn a user's past posts into the profile view a reward model sees."""

from prbench.profiles.base import ProfileBuilder, ProfileView, render_posts

__all__ = ["ProfileBuilder", "ProfileView", "render_posts"]
