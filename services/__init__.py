"""IntraSkill services. Each talks to the others over HTTP only; none imports another."""
