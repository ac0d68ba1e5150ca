"""Moving memories between stores: export, import (and what it accepts), sync with the cloud library."""
