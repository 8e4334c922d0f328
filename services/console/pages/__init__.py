"""One module per page family, each an APIRouter of thin handlers over the registry client."""
