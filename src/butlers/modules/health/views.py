"""The health module's dashboard views: measurements, medications, symptoms."""

from butlers.modules.health.store import MEASUREMENTS, MEDICATIONS, SYMPTOMS
from butlers.modules.view import Filter, View

VIEWS = (
    View("/api/health/measurements", "Measurement", MEASUREMENTS, (Filter("type"),)),
    View("/api/health/medications", "Medication", MEDICATIONS),
    View("/api/health/symptoms", "Symptom", SYMPTOMS),
)
