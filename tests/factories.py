"""factory_boy factories and the example tree of the budget-governance issue.

A factory writes rows as they are stored, without the services: for the state a test
starts from (a history, a world of jobs and attempts). What a test exercises goes through
the services (`budget_tree_import`, `job_submit`, ...)."""

import factory
from django.contrib.auth import get_user_model
from django.utils import timezone
from django.utils.text import slugify

EXAMPLE_TREE = {
    "name": "org",
    "managers": ["ceo"],
    "children": [
        {
            "name": "prog-a",
            "weight": 50,
            "managers": ["lead-a"],
            "children": [
                {"name": "a1", "weight": 70, "managers": ["pi-a1"], "members": ["ann"]},
                {"name": "a2", "weight": 30, "members": ["bob"]},
            ],
        },
        {
            "name": "prog-b",
            "weight": 50,
            "managers": ["lead-b"],
            "children": [{"name": "b1", "weight": 1}],
        },
    ],
}


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")

    @factory.post_generation
    def password(self, create, extracted, **kwargs):
        self.set_password(extracted or "pw")
        if create:
            self.save(update_fields=["password"])


class SuperUserFactory(UserFactory):
    is_superuser = True
    is_staff = True


class ClusterFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = "scheduler.Cluster"

    name = factory.Sequence(lambda n: f"cluster{n}")
    host_count = 10
    gpus_per_host = 8


class HostFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = "scheduler.Host"

    cluster = factory.SubFactory(ClusterFactory)
    name = factory.Sequence(lambda n: f"gpu{n:03d}")
    gpus = 8


class BudgetNodeFactory(factory.django.DjangoModelFactory):
    """A node of the budget tree (a project under no parent unless `parent=` is given)."""

    class Meta:
        model = "budgets.BudgetNode"

    name = factory.Sequence(lambda n: f"node{n}")
    slug = factory.LazyAttribute(lambda node: slugify(node.name))
    parent = None


class MembershipFactory(factory.django.DjangoModelFactory):
    """`user`'s role (member unless `role="manager"`) on `node`."""

    class Meta:
        model = "budgets.Membership"

    user = factory.SubFactory(UserFactory)
    node = factory.SubFactory(BudgetNodeFactory)
    role = "member"


class JobFactory(factory.django.DjangoModelFactory):
    """A job row submitted now (`submitted_at=`), queued when submitted."""

    class Meta:
        model = "scheduler.Job"

    cluster = factory.SubFactory(ClusterFactory)
    project = factory.SubFactory(BudgetNodeFactory)
    submitter = factory.SubFactory(UserFactory)
    name = "j"
    gpus = 1
    submitted_at = factory.LazyFunction(timezone.now)
    queued_at = factory.SelfAttribute("submitted_at")


class AttemptFactory(factory.django.DjangoModelFactory):
    """An attempt of `job` (a new job unless given) on its cluster, for its project and
    GPUs, allocated, created when the job was submitted; its state and times as given."""

    class Meta:
        model = "scheduler.Attempt"

    job = factory.SubFactory(JobFactory)
    number = 1
    attempt_id = factory.Sequence(lambda n: f"attempt-{n}")
    cluster = factory.SelfAttribute("job.cluster")
    project = factory.SelfAttribute("job.project")
    gpus = factory.SelfAttribute("job.gpus")
    allocated = True
    created_at = factory.SelfAttribute("job.submitted_at")
    state = "running"

    @classmethod
    def _create(cls, model_class, *args, **kwargs):
        """Saved, and counted by its job as the cycle counts a start (`attempt_count`,
        at least `number`: a job read skips the attempts of a job that has none)."""
        attempt = super()._create(model_class, *args, **kwargs)
        job = attempt.job
        if job.attempt_count < attempt.number:
            type(job).objects.filter(pk=job.pk).update(attempt_count=attempt.number)
            job.attempt_count = attempt.number
        return attempt
