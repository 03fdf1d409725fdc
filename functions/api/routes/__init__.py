"""One router per area of the public interface."""
